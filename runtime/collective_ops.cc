#include "runtime/collective_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "backends/backend.h"
#include "backends/reduce_kind.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype_dispatch.h"
#include "ir/prim.h"
#include "ir/types.h"

namespace shardjit::runtime {
namespace {

using backends::ReduceKind;
using ir::DType;
using ir::Tensor;

void CopyBoxRec(const char* src, const std::vector<int64_t>& src_strides, char* dst,
                const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& extent,
                size_t dim, int64_t elem) {
  if (dim + 1 == extent.size()) {
    std::memcpy(dst, src, extent[dim] * elem);
    return;
  }
  for (int64_t i = 0; i < extent[dim]; ++i) {
    CopyBoxRec(src + i * src_strides[dim] * elem, src_strides, dst + i * dst_strides[dim] * elem,
               dst_strides, extent, dim + 1, elem);
  }
}

// `t` with a size-1 dimension inserted at `axis` (same storage).
Tensor ExpandDims(const Tensor& t, int64_t axis) {
  std::vector<int64_t> dims = t.dims();
  dims.insert(dims.begin() + axis, 1);
  return t.Reshaped(dims);
}

// The reduction of a collective: psum and psum_scatter sum, pmean sums and divides by the group
// size, pmax and pmin.
struct Reduction {
  ReduceKind kind = ReduceKind::kSum;
  bool mean = false;  // divide the sum by the number of operands
};

// What all-reduce (or psum_scatter) `kind` computes.
Reduction ReductionFor(ir::Prim kind) {
  Reduction r;
  switch (ir::ReductionOf(kind).value_or(ir::ReduceOp::kSum)) {
    case ir::ReduceOp::kSum:
      r.kind = ReduceKind::kSum;
      break;
    case ir::ReduceOp::kMax:
      r.kind = ReduceKind::kMax;
      break;
    case ir::ReduceOp::kMin:
      r.kind = ReduceKind::kMin;
      break;
  }
  r.mean = kind == ir::Prim::kPmean;
  return r;
}

template <typename T, typename Acc>
Acc Load(const Tensor& t, int64_t i) {
  return static_cast<Acc>(t.data_as<T>()[i]);
}


// acc <kind> x: the backends' in-order step (integer sums wrap), except that a floating max or min
// with a NaN operand is the canonical NaN.
template <typename Acc>
Acc Combine(ReduceKind kind, Acc acc, Acc x) {
  if constexpr (std::is_floating_point_v<Acc>) {
    if (kind != ReduceKind::kSum && (std::isnan(acc) || std::isnan(x))) return NAN;
  }
  return backends::CombineInOrder(kind, acc, x);
}

// The element of its operand that box `b`'s first element is (ReduceRange's `firsts`).
int64_t FirstOf(const std::vector<int64_t>& firsts, size_t b) {
  return firsts.empty() ? 0 : firsts[b];
}

// Elements [begin, end) of the elementwise reduction of `boxes` (in group order) into `out`,
// accumulating in Acc (f32 for the 16-bit floats, as XLA does) and rounding once. A mean is
// stored in the result's dtype: T for floats, f32 for integers.
template <typename T, typename Acc>
void ReduceInto(const std::vector<Tensor>& boxes, const std::vector<int64_t>& firsts,
                Reduction reduction, Tensor& out, int64_t begin, int64_t end) {
  std::vector<Acc> acc(end - begin);
  for (int64_t i = begin; i < end; ++i) {
    acc[i - begin] = Load<T, Acc>(boxes[0], i - FirstOf(firsts, 0));
  }
  for (size_t b = 1; b < boxes.size(); ++b) {
    const int64_t first = FirstOf(firsts, b);
    for (int64_t i = begin; i < end; ++i) {
      acc[i - begin] = Combine(reduction.kind, acc[i - begin], Load<T, Acc>(boxes[b], i - first));
    }
  }
  const int64_t count = static_cast<int64_t>(boxes.size());
  if (!reduction.mean) {
    T* o = out.data_as<T>();
    for (int64_t i = begin; i < end; ++i) o[i] = T(acc[i - begin]);
  } else if constexpr (std::is_floating_point_v<Acc>) {
    T* o = out.data_as<T>();
    for (int64_t i = begin; i < end; ++i) o[i] = T(acc[i - begin] / static_cast<Acc>(count));
  } else {
    float* o = out.data_as<float>();
    for (int64_t i = begin; i < end; ++i) {
      o[i] = static_cast<float>(acc[i - begin]) / static_cast<float>(count);
    }
  }
}

// Elements [begin, begin + n) of `t` (f32 or bf16) widened to f32 in `out`.
void WidenToF32(const Tensor& t, int64_t begin, int64_t n, float* out) {
  if (t.dtype() == DType::kF32) {
    std::memcpy(out, t.data_as<float>() + begin, n * sizeof(float));
    return;
  }
  const uint16_t* bits = static_cast<const uint16_t*>(t.data()) + begin;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(&out[i], &u, sizeof(float));
  }
}

// ReduceInto for f32 and bf16 on the backend's buffer kernels: the same f32 accumulation in
// group order and one rounding at the end. bf16 members are widened first, since the kernels
// would round a bf16 accumulator at every step.
absl::Status ReduceFloat(const std::vector<Tensor>& boxes, const std::vector<int64_t>& firsts,
                         Reduction reduction, const backends::Backend& backend, Tensor& out,
                         int64_t begin, int64_t end) {
  const int64_t n = end - begin;
  const bool f32 = out.dtype() == DType::kF32;
  std::vector<float> scratch;
  float* acc = f32 ? out.data_as<float>() + begin : nullptr;
  if (!f32) {
    scratch.resize(2 * n);
    acc = scratch.data();
  }
  // f32 into f32: the first combination reads both operands where they are (one pass, not a
  // copy and a pass).
  size_t first = 1;
  if (f32 && boxes.size() > 1) {
    RETURN_IF_ERROR(backend.ReduceBuffers(
        reduction.kind, DType::kF32, boxes[1].data_as<float>() + begin - FirstOf(firsts, 1),
        boxes[0].data_as<float>() + begin - FirstOf(firsts, 0), acc, n));
    first = 2;
  } else {
    WidenToF32(boxes[0], begin - FirstOf(firsts, 0), n, acc);
  }
  for (size_t b = first; b < boxes.size(); ++b) {
    const int64_t at = begin - FirstOf(firsts, b);
    const float* operand = f32 ? boxes[b].data_as<float>() + at : scratch.data() + n;
    if (!f32) WidenToF32(boxes[b], at, n, scratch.data() + n);
    // ReduceBuffers keeps its second input on ties (max(-0, +0)), as std::max(acc, x) does.
    RETURN_IF_ERROR(backend.ReduceBuffers(reduction.kind, DType::kF32, operand, acc, acc, n));
  }
  const int64_t count = static_cast<int64_t>(boxes.size());
  if (f32) {
    if (reduction.mean) {
      for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] / static_cast<float>(count);
    }
    return absl::OkStatus();
  }
  ir::bf16* dst = out.data_as<ir::bf16>() + begin;
  for (int64_t i = 0; i < n; ++i) {
    // As Tensor::SetDouble rounds: through float, once.
    const float v =
        reduction.mean
            ? static_cast<float>(static_cast<double>(acc[i]) / static_cast<double>(count))
            : acc[i];
    dst[i] = ir::bf16(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Reduce(const std::vector<Tensor>& boxes, ir::Prim kind,
                              const backends::Backend& backend,
                              const ir::ShapedType& out_type, ir::Allocator* allocator) {
  Tensor out = Tensor::Empty(out_type, allocator);
  RETURN_IF_ERROR(ReduceRange(boxes, kind, backend, out, 0, out.num_elements()));
  return out;
}

// Tiled gather: member j's operand lands at offset j*size along `axis`.
// The inputs (of one type) concatenated along `axis` into `out` (of their concatenated type). An
// input that is already its block of `out` (one run of it, received in place) is not copied.
void ConcatInto(const std::vector<Tensor>& inputs, int64_t axis, Tensor& out) {
  const int64_t block = inputs[0].dims()[axis];
  std::vector<int64_t> zero(out.dims().size(), 0);
  const bool runs = GatherBlocksAreRuns(inputs[0].type(), axis);
  for (size_t j = 0; j < inputs.size(); ++j) {
    const int64_t first = static_cast<int64_t>(j) * inputs[j].num_elements();
    if (runs && inputs[j].num_elements() > 0 &&
        inputs[j].data() == static_cast<const char*>(out.data()) +
                                first * ir::DTypeSize(out.dtype())) {
      continue;
    }
    std::vector<int64_t> offset = zero;
    offset[axis] = static_cast<int64_t>(j) * block;
    CopyBox(inputs[j], zero, out, offset, inputs[j].dims());
  }
}

// The `index`-th of `n` equal blocks of `t` along `axis`, as a contiguous tensor: a view of `t`
// when the block is one run of it, else a copy.
Tensor Block(const Tensor& t, int64_t axis, int64_t n, int64_t index, ir::Allocator* allocator) {
  std::vector<int64_t> extent = t.dims();
  extent[axis] /= n;
  const ir::ShapedType type{t.dtype(), extent};
  if (GatherBlocksAreRuns(type, axis)) return t.Subrange(index * type.num_elements(), type);
  std::vector<int64_t> src_offset(t.dims().size(), 0);
  src_offset[axis] = index * extent[axis];
  Tensor out = Tensor::Empty(type, allocator);
  CopyBox(t, src_offset, out, std::vector<int64_t>(extent.size(), 0), extent);
  return out;
}

absl::StatusOr<Tensor> AllToAll(const ir::Op& op, const ir::ShapedType& out_type,
                                const GroupOperands& group, ir::Allocator* allocator) {
  const ir::AllToAllAttrs& a = op.all_to_all();
  int64_t split = a.split_axis(), concat = a.concat_axis();
  std::vector<Tensor> inputs = group.inputs;
  if (!a.tiled() && split != concat) {
    // As JAX lowers it: insert a size-1 axis for the gathered dimension, then run tiled.
    if (split < concat) {
      ++concat;
    } else {
      ++split;
    }
    for (Tensor& t : inputs) t = ExpandDims(t, concat);
  }
  // Member j's block `my_index` along `split` lands at block j along `concat`: one copy each.
  const int64_t n = static_cast<int64_t>(inputs.size());
  std::vector<int64_t> extent = inputs[0].dims();
  extent[split] /= n;
  ir::ShapedType type{inputs[0].dtype(), extent};
  type.dims[concat] *= n;
  Tensor out = Tensor::Empty(type, allocator);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> src_offset(extent.size(), 0), dst_offset(extent.size(), 0);
    src_offset[split] = group.my_index * extent[split];
    dst_offset[concat] = j * extent[concat];
    CopyBox(inputs[j], src_offset, out, dst_offset, extent);
  }
  return out.Reshaped(out_type.dims);
}

// One slice a sender's offset and size vectors send to this member.
struct RaggedSlice {
  int64_t sender = 0;  // group index
  int64_t index = 0;   // into the sender's vectors
  int64_t input_offset = 0, size = 0, output_offset = 0;
};

// ragged_all_to_all: `output` with the rows every member sends to this one written in. Checks
// every slice against the operand's and output's rows, the receiver's recv_sizes against the
// senders' send_sizes, and that no two received slices overlap.
absl::StatusOr<Tensor> RaggedAllToAll(const ir::Op& op, const GroupOperands& group,
                                      ir::Allocator* allocator) {
  const int64_t n = static_cast<int64_t>(group.all_inputs.size());
  const int64_t me = group.my_index;
  const std::vector<Tensor>& mine = group.all_inputs[me];
  const int64_t k_total = mine[2].num_elements();
  const int64_t per_member = k_total / n;
  const int64_t operand_rows = mine[0].dims()[0];
  const int64_t output_rows = mine[1].dims()[0];
  const int64_t row_bytes = output_rows == 0 ? 0 : mine[1].byte_size() / output_rows;
  const int32_t* recv_sizes = mine[5].data_as<int32_t>();
  auto where = [&](const RaggedSlice& s) {
    return fmt::format("{}: slice {} sent by axis index {} to axis index {}", op.opcode(),
                       s.index, group.axis_indices[s.sender], group.axis_indices[me]);
  };
  std::vector<RaggedSlice> slices;
  slices.reserve(k_total);
  for (int64_t j = 0; j < n; ++j) {
    const std::vector<Tensor>& theirs = group.all_inputs[j];
    for (int64_t k = 0; k < per_member; ++k) {
      RaggedSlice s{j, me * per_member + k};
      s.input_offset = theirs[2].data_as<int32_t>()[s.index];
      s.size = theirs[3].data_as<int32_t>()[s.index];
      s.output_offset = theirs[4].data_as<int32_t>()[s.index];
      const int64_t expected = recv_sizes[j * per_member + k];
      if (s.size < 0) {
        return absl::InvalidArgumentError(
            fmt::format("{}: send_sizes[{}] is negative ({})", where(s), s.index, s.size));
      }
      // An empty slice is valid wherever its offsets point (as in JAX); it copies nothing.
      if (s.size > 0 && (s.input_offset < 0 || s.input_offset + s.size > operand_rows)) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: rows [{}, {}) (input_offsets[{}], send_sizes[{}]) are out of range for the "
            "operand's {} rows",
            where(s), s.input_offset, s.input_offset + s.size, s.index, s.index, operand_rows));
      }
      if (s.size > 0 && (s.output_offset < 0 || s.output_offset + s.size > output_rows)) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: rows [{}, {}) (output_offsets[{}], send_sizes[{}]) are out of range for the "
            "output's {} rows",
            where(s), s.output_offset, s.output_offset + s.size, s.index, s.index, output_rows));
      }
      if (expected != s.size) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: the receiver's recv_sizes[{}] is {} but the sender's send_sizes[{}] is {}",
            where(s), j * per_member + k, expected, s.index, s.size));
      }
      if (s.size > 0) slices.push_back(s);
    }
  }
  std::sort(slices.begin(), slices.end(), [](const RaggedSlice& a, const RaggedSlice& b) {
    return a.output_offset < b.output_offset;
  });
  for (size_t i = 1; i < slices.size(); ++i) {
    const RaggedSlice& a = slices[i - 1];
    const RaggedSlice& b = slices[i];
    if (b.output_offset < a.output_offset + a.size) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: output rows [{}, {}) overlap rows [{}, {}) of slice {} from axis index {}",
          where(b), b.output_offset, b.output_offset + b.size, a.output_offset,
          a.output_offset + a.size, a.index, group.axis_indices[a.sender]));
    }
  }
  Tensor out = mine[1].Copy(allocator);
  char* dst = static_cast<char*>(out.data());
  for (const RaggedSlice& s : slices) {
    const char* src = static_cast<const char*>(group.all_inputs[s.sender][0].data());
    std::memcpy(dst + s.output_offset * row_bytes, src + s.input_offset * row_bytes,
                s.size * row_bytes);
  }
  return out;
}

}  // namespace

bool GatherBlocksAreRuns(const ir::ShapedType& operand, int64_t axis) {
  for (int64_t d = 0; d < axis && d < operand.rank(); ++d) {
    if (operand.dims[d] != 1) return false;
  }
  return true;
}

absl::Status ReduceRange(const std::vector<Tensor>& boxes, ir::Prim kind,
                         const backends::Backend& backend, Tensor& out,
                         int64_t begin, int64_t end, const std::vector<int64_t>& firsts) {
  const Reduction reduction = ReductionFor(kind);
  const DType dtype = boxes[0].dtype();
  if (begin >= end) return absl::OkStatus();
  if ((dtype == DType::kF32 || dtype == DType::kBF16) && out.dtype() == dtype) {
    return ReduceFloat(boxes, firsts, reduction, backend, out, begin, end);
  }
  return ir::VisitDType(dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return absl::InvalidArgumentError(fmt::format("{}: cannot reduce {} values",
                                                    ir::PrimName(kind), ir::DTypeName(dtype)));
    } else {
      ReduceInto<T, ir::ComputeType<T>>(boxes, firsts, reduction, out, begin, end);
      return absl::OkStatus();
    }
  });
}

void CopyBox(const Tensor& src, const std::vector<int64_t>& src_offset, Tensor& dst,
             const std::vector<int64_t>& dst_offset, const std::vector<int64_t>& extent) {
  for (int64_t e : extent) {
    if (e == 0) return;
  }
  int64_t elem = ir::DTypeSize(src.dtype());
  if (extent.empty()) {
    std::memcpy(dst.data(), src.data(), elem);
    return;
  }
  std::vector<int64_t> ss = ir::RowMajorStrides(src.dims());
  std::vector<int64_t> ds = ir::RowMajorStrides(dst.dims());
  int64_t s0 = 0, d0 = 0;
  for (size_t i = 0; i < extent.size(); ++i) {
    s0 += src_offset[i] * ss[i];
    d0 += dst_offset[i] * ds[i];
  }
  CopyBoxRec(static_cast<const char*>(src.data()) + s0 * elem, ss,
             static_cast<char*>(dst.data()) + d0 * elem, ds, extent, 0, elem);
}

absl::StatusOr<Tensor> ComputeCollective(const ir::Op& op, const GroupOperands& group,
                                         const backends::Backend& backend,
                                         ir::Allocator* allocator) {
  // An asynchronous start computes what its blocking twin does.
  const ir::Prim kind = ir::CollectiveKind(ir::PrimOf(op));
  const ir::ShapedType out_type = ir::FromProto(op.result_types(0)).Awaited();
  int64_t n = static_cast<int64_t>(group.inputs.size());
  if (ir::IsAllReduce(kind)) return Reduce(group.inputs, kind, backend, out_type, allocator);
  if (kind == ir::Prim::kAllGather) {
    const ir::AllGatherAttrs& a = op.all_gather();
    Tensor out = group.output.defined() && group.output.type() == out_type
                     ? group.output
                     : Tensor::Empty(out_type, allocator);
    if (a.tiled()) {
      ConcatInto(group.inputs, a.axis(), out);
    } else {
      std::vector<Tensor> expanded;
      for (const Tensor& t : group.inputs) expanded.push_back(ExpandDims(t, a.axis()));
      ConcatInto(expanded, a.axis(), out);
    }
    return out;
  }
  if (kind == ir::Prim::kPsumScatter) {
    const ir::PsumScatterAttrs& a = op.psum_scatter();
    std::vector<Tensor> blocks;
    for (const Tensor& t : group.inputs) {
      blocks.push_back(Block(t, a.scatter_dimension(), n, group.my_index, allocator));
    }
    return Reduce(blocks, kind, backend, out_type, allocator);
  }
  if (kind == ir::Prim::kPpermute) {
    int64_t me = group.axis_indices[group.my_index];
    for (const ir::PermutePair& p : op.ppermute().perm()) {
      if (p.target() != me) continue;
      for (int64_t j = 0; j < n; ++j) {
        // Operands are immutable: the result aliases the source's buffer (zero copy).
        if (group.axis_indices[j] == p.source()) return group.inputs[j];
      }
    }
    return Tensor::Zeros(out_type, allocator);
  }
  if (kind == ir::Prim::kPbroadcast) {
    for (int64_t j = 0; j < n; ++j) {
      // Zero copy, as ppermute.
      if (group.axis_indices[j] == op.pbroadcast().source()) return group.inputs[j];
    }
    return absl::InvalidArgumentError(fmt::format(
        "{}: source {} is not in the group", op.opcode(), op.pbroadcast().source()));
  }
  if (kind == ir::Prim::kAllToAll) return AllToAll(op, out_type, group, allocator);
  if (kind == ir::Prim::kRaggedAllToAll) return RaggedAllToAll(op, group, allocator);
  return absl::UnimplementedError(fmt::format(
      "{}: not a data collective", kind == ir::Prim::kUnknown ? op.opcode() : ir::PrimName(kind)));
}

}  // namespace shardjit::runtime
