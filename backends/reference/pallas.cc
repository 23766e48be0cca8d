#include "backends/reference/pallas.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "backends/reference/kernel.h"
#include "backends/reference/strided_copy.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/pallas.h"
#include "ir/prim.h"
#include "ir/printer.h"
#include "ir/types.h"

namespace shardjit::backends::reference {
namespace {

ir::Tensor Index(int64_t v, ir::Allocator* allocator) {
  return ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(v)}, allocator);
}

// Where one blocked operand or result sits in its array at the current step.
struct BlockWindow {
  std::vector<int64_t> start;   // per array dimension
  std::vector<int64_t> extent;  // the block's extent per array dimension (1 when squeezed)
  std::vector<int64_t> valid;   // how much of it lies inside the array
};

// Copies the part of the block inside the array between `array` and `block` (to the block when
// `into_block`).
void CopyBlock(ir::Tensor& array, ir::Tensor& block, const BlockWindow& w, bool into_block) {
  const int64_t elem = ir::DTypeSize(array.dtype());
  const std::vector<int64_t> array_strides = ir::RowMajorStrides(array.dims());
  const std::vector<int64_t> block_strides = ir::RowMajorStrides(w.extent);
  int64_t array_offset = 0;
  for (size_t d = 0; d < w.start.size(); ++d) array_offset += w.start[d] * array_strides[d];
  char* a = static_cast<char*>(array.data()) + array_offset * elem;
  char* b = static_cast<char*>(block.data());
  if (into_block) {
    CopyStrided(b, block_strides, a, array_strides, w.valid, elem);
  } else {
    CopyStrided(a, array_strides, b, block_strides, w.valid, elem);
  }
}

class GridRun {
 public:
  GridRun(const ir::Op& op, const std::vector<ir::Tensor>& operands,
          const KernelRegionRunner& run, ir::Allocator* allocator)
      : op_(op),
        a_(op.pallas_call()),
        operands_(operands),
        run_(run),
        allocator_(allocator),
        base_(ir::NumDynamicGridAxes(a_)) {
    frame_.call = &op;
  }

  absl::StatusOr<std::vector<ir::Tensor>> Run() {
    const int64_t nsp = a_.num_scalar_prefetch();
    const ir::Region& kernel = a_.kernel();
    // Private copies: a kernel may store into any ref, and the operands belong to the caller.
    frame_.grid = GridSizes(a_, operands_);
    for (int64_t i = 0; i < nsp; ++i) prefetch_.push_back(operands_[base_ + i].Copy(allocator_));
    for (int i = 0; i < a_.out_shapes_size(); ++i) {
      const int64_t alias =
          i < a_.input_output_aliases_size() ? a_.input_output_aliases(i) : int64_t{-1};
      outputs_.push_back(alias >= 0 ? operands_[base_ + alias].Copy(allocator_)
                                    : PaddingArray(ir::FromProto(a_.out_shapes(i)), allocator_));
    }
    const int fixed = static_cast<int>(nsp) + a_.in_specs_size() + a_.out_specs_size();
    for (int p = 0; p < kernel.params_size(); ++p) {
      frame_.ref_names[kernel.params(p).id()] = KernelRefName(a_, p);
      if (p >= fixed) {
        scratch_.push_back(PaddingArray(ir::FromProto(kernel.params(p).type()), allocator_));
      }
    }
    for (int i = 0; i < a_.in_specs_size(); ++i) {
      if (a_.in_specs(i).whole()) whole_inputs_[i] = operands_[base_ + nsp + i].Copy(allocator_);
    }
    int64_t steps = 1;
    for (int64_t g : frame_.grid) steps *= g;
    frame_.index.assign(a_.grid_size(), 0);
    for (int64_t step = 0; step < steps; ++step) {
      int64_t rest = step;
      for (int d = a_.grid_size() - 1; d >= 0; --d) {
        frame_.index[d] = rest % frame_.grid[d];
        rest /= frame_.grid[d];
      }
      RETURN_IF_ERROR(Step());
    }
    return std::move(outputs_);
  }

 private:
  absl::Status Step() {
    const int64_t nsp = a_.num_scalar_prefetch();
    std::vector<ir::Tensor> args(prefetch_.begin(), prefetch_.end());
    std::vector<BlockWindow> out_windows(a_.out_specs_size());
    for (int i = 0; i < a_.in_specs_size(); ++i) {
      const ir::BlockSpec& spec = a_.in_specs(i);
      if (spec.whole()) {
        args.push_back(whole_inputs_.at(i));
        continue;
      }
      ir::Tensor source = operands_[base_ + nsp + i];
      ASSIGN_OR_RETURN(BlockWindow w,
                       Window(spec, source.type(), fmt::format("in_specs[{}]", i)));
      ir::Tensor block = PaddingArray(ir::BlockRefType(spec, source.type()), allocator_);
      CopyBlock(source, block, w, /*into_block=*/true);
      args.push_back(std::move(block));
    }
    for (int i = 0; i < a_.out_specs_size(); ++i) {
      const ir::BlockSpec& spec = a_.out_specs(i);
      if (spec.whole()) {
        args.push_back(outputs_[i]);
        continue;
      }
      ASSIGN_OR_RETURN(out_windows[i],
                       Window(spec, outputs_[i].type(), fmt::format("out_specs[{}]", i)));
      ir::Tensor block = PaddingArray(ir::BlockRefType(spec, outputs_[i].type()), allocator_);
      CopyBlock(outputs_[i], block, out_windows[i], /*into_block=*/true);
      args.push_back(std::move(block));
    }
    std::vector<ir::Tensor> blocks(args.begin() + nsp + a_.in_specs_size(), args.end());
    args.insert(args.end(), scratch_.begin(), scratch_.end());
    RETURN_IF_ERROR(run_(a_.kernel(), std::move(args), frame_).status());
    for (int i = 0; i < a_.out_specs_size(); ++i) {
      if (!a_.out_specs(i).whole()) CopyBlock(outputs_[i], blocks[i], out_windows[i], false);
    }
    return absl::OkStatus();
  }

  // Runs the index map of `spec` and checks that the block starts inside the array.
  absl::StatusOr<BlockWindow> Window(const ir::BlockSpec& spec, const ir::ShapedType& array,
                                     const std::string& name) {
    std::vector<ir::Tensor> args;
    for (int64_t i : frame_.index) args.push_back(Index(i, allocator_));
    args.insert(args.end(), prefetch_.begin(), prefetch_.end());
    ASSIGN_OR_RETURN(std::vector<ir::Tensor> indices,
                     run_(spec.index_map(), std::move(args), frame_));
    BlockWindow w;
    std::vector<int64_t> blocks;
    for (int d = 0; d < array.rank(); ++d) {
      const int64_t extent = ir::BlockExtent(spec, d);
      const int64_t index = IndexValue(indices[d], 0);
      blocks.push_back(index);
      const int64_t start = index * extent;
      w.start.push_back(start);
      w.extent.push_back(extent);
      w.valid.push_back(std::clamp<int64_t>(array.dims[d] - start, 0, extent));
    }
    for (int d = 0; d < array.rank(); ++d) {
      if (w.start[d] < 0 || (w.start[d] >= array.dims[d] && array.dims[d] > 0)) {
        return BlockOutsideArray(frame_.Where(), name, blocks, w.start[d], d, array);
      }
    }
    return w;
  }

  const ir::Op& op_;
  const ir::PallasCallAttrs& a_;
  const std::vector<ir::Tensor>& operands_;
  const KernelRegionRunner& run_;
  ir::Allocator* allocator_;
  // The operands sizing grid axes at run time come first.
  int64_t base_;
  KernelFrame frame_;
  std::vector<ir::Tensor> prefetch_;
  std::vector<ir::Tensor> outputs_;
  std::vector<ir::Tensor> scratch_;
  std::unordered_map<int, ir::Tensor> whole_inputs_;
};

// The window of a ref_load / ref_store: starts from operands[first..], checked against the ref.
absl::StatusOr<BlockWindow> RefWindow(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                                      size_t first, const KernelFrame& frame) {
  const ir::Tensor& ref = operands[0];
  BlockWindow w;
  for (int64_t d = 0; d < static_cast<int64_t>(ref.dims().size()); ++d) {
    const int64_t start = IndexValue(operands[first + d], 0);
    const int64_t size = op.ref_window().sizes(d);
    w.start.push_back(start);
    w.extent.push_back(size);
    w.valid.push_back(size);
  }
  for (size_t d = 0; d < w.start.size(); ++d) {
    if (w.start[d] < 0 || w.start[d] + w.extent[d] > ref.dims()[d]) {
      auto it = frame.ref_names.find(op.operands(0));
      return WindowOutsideRef(
          op, frame.Where(), w.start, w.extent,
          it != frame.ref_names.end() ? it->second : "ref " + ir::ValueName(op.operands(0)),
          ref.type());
    }
  }
  return w;
}

}  // namespace

void FillWithPadding(ir::Tensor& t) {
  const ir::Tensor one = ir::Tensor::FromDoubles({t.dtype(), {}}, {ir::PaddingValue(t.dtype())});
  FillElements(t.data(), t.num_elements(), one.data(), ir::DTypeSize(t.dtype()));
}

ir::Tensor PaddingArray(const ir::ShapedType& type, ir::Allocator* allocator) {
  ir::Tensor t = ir::Tensor::Empty(type.Array(), allocator);
  FillWithPadding(t);
  return t;
}

std::vector<int64_t> GridSizes(const ir::PallasCallAttrs& a,
                               const std::vector<ir::Tensor>& operands) {
  std::vector<int64_t> grid;
  int next = 0;
  for (int64_t g : a.grid()) {
    grid.push_back(g != -1 ? g : std::max<int64_t>(0, IndexValue(operands[next++], 0)));
  }
  return grid;
}

std::string KernelWhere(const ir::Op& call, const std::vector<int64_t>& index) {
  const std::string& name = call.pallas_call().name();
  return fmt::format("kernel {} at grid index ({})", name.empty() ? "(unnamed)" : name,
                     absl::StrJoin(index, ","));
}

std::string KernelRefName(const ir::PallasCallAttrs& a, int param) {
  const int nsp = static_cast<int>(a.num_scalar_prefetch());
  const int fixed = nsp + a.in_specs_size() + a.out_specs_size();
  if (param < nsp) return fmt::format("scalar-prefetch ref {}", param);
  if (param < nsp + a.in_specs_size()) return fmt::format("in_specs[{}] block", param - nsp);
  if (param < fixed) return fmt::format("out_specs[{}] block", param - nsp - a.in_specs_size());
  return fmt::format("scratch ref {}", param - fixed);
}

absl::Status BlockOutsideArray(const std::string& where, const std::string& spec_name,
                               const std::vector<int64_t>& blocks, int64_t start, int dim,
                               const ir::ShapedType& array) {
  return absl::OutOfRangeError(fmt::format(
      "pallas_call: {}: {} index_map gives block indices ({}), so the block starts at element {} "
      "of dimension {}, outside the array {}",
      where, spec_name, absl::StrJoin(blocks, ","), start, dim, array.ToString()));
}

absl::Status WindowOutsideRef(const ir::Op& op, const std::string& where,
                              const std::vector<int64_t>& starts,
                              const std::vector<int64_t>& sizes, const std::string& ref_name,
                              const ir::ShapedType& ref) {
  return absl::OutOfRangeError(fmt::format(
      "{}: {}: the window at ({}) of sizes ({}) leaves the {} of shape {}", op.opcode(), where,
      absl::StrJoin(starts, ","), absl::StrJoin(sizes, ","), ref_name, ref.Array().ToString()));
}

absl::StatusOr<std::vector<ir::Tensor>> RunPallasCall(const ir::Op& op,
                                                      const std::vector<ir::Tensor>& operands,
                                                      const KernelRegionRunner& run,
                                                      ir::Allocator* allocator) {
  return GridRun(op, operands, run, allocator).Run();
}

absl::StatusOr<std::vector<ir::Tensor>> RunKernelOp(const ir::Op& op,
                                                    const std::vector<ir::Tensor>& operands,
                                                    const KernelFrame& frame,
                                                    ir::Allocator* allocator) {
  switch (ir::PrimOf(op)) {
    case ir::Prim::kProgramId:
      return std::vector<ir::Tensor>{Index(frame.index.at(op.grid_axis().axis()), allocator)};
    case ir::Prim::kNumPrograms:
      return std::vector<ir::Tensor>{
          Index(frame.grid.at(op.grid_axis().axis()), allocator)};
    case ir::Prim::kRefLoad: {
      ASSIGN_OR_RETURN(BlockWindow w, RefWindow(op, operands, 1, frame));
      ir::Tensor ref = operands[0];
      ir::Tensor out = ir::Tensor::Empty(ResultType(op), allocator);
      CopyBlock(ref, out, w, /*into_block=*/true);
      return std::vector<ir::Tensor>{std::move(out)};
    }
    case ir::Prim::kRefStore: {
      ASSIGN_OR_RETURN(BlockWindow w, RefWindow(op, operands, 2, frame));
      ir::Tensor ref = operands[0];
      ir::Tensor value = operands[1];
      CopyBlock(ref, value, w, /*into_block=*/false);
      return std::vector<ir::Tensor>{};
    }
    default:
      return absl::InternalError(fmt::format("{} is not a kernel op", op.opcode()));
  }
}

}  // namespace shardjit::backends::reference
