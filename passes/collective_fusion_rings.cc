// The rings of collective-fusion and the emitter they are built with.
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "ir/async.h"
#include "ir/primitive.h"
#include "passes/collective_fusion_internal.h"

namespace shardjit::passes::collective_fusion {

OpEmitter::OpEmitter(const ir::Mesh& mesh, const spmd_rewrite::TypeMap& types,
                     const ir::Op& origin, int64_t& next_id)
    : mesh_(mesh), types_(types), origin_(&origin), next_id_(next_id) {}

int64_t OpEmitter::Emit(ir::Op op, const std::vector<int64_t>& operands, int64_t result) {
  const int64_t id = result >= 0 ? result : next_id_++;
  if (!status_.ok()) return id;
  std::vector<ir::ShapedType> operand_types;
  for (int64_t v : operands) {
    op.add_operands(v);
    operand_types.push_back(types_.at(v));
  }
  absl::StatusOr<std::vector<ir::ShapedType>> out =
      ir::InferResultTypes({&mesh_, /*in_spmd=*/true, nullptr}, operand_types, op);
  if (!out.ok()) {
    status_ = out.status();
    return id;
  }
  op.add_results(id);
  *op.add_result_types() = ir::ToProto((*out)[0]);
  types_[id] = (*out)[0];
  op.set_name_scope(origin_->name_scope());
  if (origin_->has_loc()) *op.mutable_loc() = origin_->loc();
  ops_.push_back(std::move(op));
  return id;
}

int64_t OpEmitter::Emit(const std::string& opcode, const std::vector<int64_t>& operands,
                        int64_t result) {
  ir::Op op;
  op.set_opcode(opcode);
  return Emit(std::move(op), operands, result);
}

int64_t OpEmitter::ScalarS32(int64_t value) {
  if (auto it = scalars_.find(value); it != scalars_.end()) return it->second;
  ir::Op op;
  op.set_opcode("constant");
  op.mutable_constant()->set_dtype(ir::S32);
  op.mutable_constant()->add_value(static_cast<double>(value));
  return scalars_[value] = Emit(std::move(op), {});
}

int64_t OpEmitter::Zeros(const ir::ShapedType& type) {
  ir::Op op;
  op.set_opcode("constant");
  op.mutable_constant()->set_dtype(ir::ToProto(type.dtype));
  for (int64_t d : type.dims) op.mutable_constant()->add_shape(d);
  op.mutable_constant()->add_value(0);
  return Emit(std::move(op), {});
}

int64_t OpEmitter::AxisIndex(const AxisNames& axes) {
  ir::Op op;
  op.set_opcode("axis_index");
  *op.mutable_axis()->mutable_axes() = axes;
  return Emit(std::move(op), {});
}

int64_t OpEmitter::ShardStart(int64_t me, int64_t shift, int64_t n, int64_t scale) {
  int64_t index = me;
  if (const int64_t s = ((shift % n) + n) % n; s != 0) {
    index = Emit("rem", {Emit("add", {me, ScalarS32(s)}), ScalarS32(n)});
  }
  return scale == 1 ? index : Emit("mul", {index, ScalarS32(scale)});
}

int64_t OpEmitter::RingPermuteStart(int64_t x, const AxisNames& axes, int64_t n, int64_t shift) {
  ir::Op op;
  op.set_opcode(ir::AsyncStartOpcode("ppermute"));
  *op.mutable_ppermute()->mutable_axes() = axes;
  for (int64_t i = 0; i < n; ++i) {
    ir::PermutePair* p = op.mutable_ppermute()->add_perm();
    p->set_source(i);
    p->set_target((((i + shift) % n) + n) % n);
  }
  return Emit(std::move(op), {x});
}

int64_t OpEmitter::Done(const std::string& blocking, int64_t future, int64_t result) {
  return Emit(ir::AsyncDoneOpcode(blocking), {future}, result);
}

int64_t OpEmitter::Block(int64_t x, int64_t dim, int64_t start, int64_t size) {
  const ir::ShapedType& t = Type(x);
  ir::Op op;
  op.set_opcode("dynamic_slice");
  std::vector<int64_t> operands = {x};
  const int64_t zero = ScalarS32(0);
  for (int64_t d = 0; d < t.rank(); ++d) {
    op.mutable_dynamic_slice()->add_slice_sizes(d == dim ? size : t.dims[d]);
    operands.push_back(d == dim ? start : zero);
  }
  return Emit(std::move(op), operands);
}

int64_t OpEmitter::Convert(int64_t x, ir::DType dtype, int64_t result) {
  ir::Op op;
  op.set_opcode("convert_element_type");
  op.mutable_convert_element_type()->set_new_dtype(ir::ToProto(dtype));
  return Emit(std::move(op), {x}, result);
}

namespace {

// dot_accumulate of `dot`'s dimension numbers into `acc` (product in acc's dtype) at `starts`.
int64_t Accumulate(OpEmitter& e, const ir::Op& dot, int64_t acc, int64_t lhs, int64_t rhs,
                   const std::vector<int64_t>& starts, int64_t result = -1) {
  ir::Op op;
  op.set_opcode("dot_accumulate");
  *op.mutable_dot_general() = dot.dot_general();
  op.mutable_dot_general()->set_preferred_element_type(ir::ToProto(e.Type(acc).dtype));
  std::vector<int64_t> operands = {acc, lhs, rhs};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return e.Emit(std::move(op), operands, result);
}

// The dtype partial products are accumulated in: f32 for a bf16 result summed over shards.
ir::DType AccumulatorType(ir::DType result, bool summed) {
  return summed && result == ir::DType::kBF16 ? ir::DType::kF32 : result;
}

}  // namespace

int64_t AllGatherRingSteps(int64_t n, bool bidirectional) {
  return bidirectional && n > 2 ? n / 2 : n - 1;
}

std::vector<ir::Op> AllGatherMatmulRing(const GatherMatmul& gm, bool bidirectional,
                                        OpEmitter& e) {
  const ir::Op& dot = *gm.dot;
  const AxisNames& axes = gm.gather->all_gather().axes();
  const int64_t x = gm.gather->operands(0);
  const int64_t shard = e.Type(x).dims[gm.dim];
  const int64_t other = dot.operands(1 - gm.side);
  const ir::ShapedType result = ir::FromProto(dot.result_types(0));
  const int64_t n = gm.n;
  const int64_t me = e.AxisIndex(axes);
  const ir::DType acc_dtype = AccumulatorType(result.dtype, gm.contracting);
  int64_t acc = e.Zeros({acc_dtype, result.dims});
  const int64_t zero = e.ScalarS32(0);
  const int64_t final_id = acc_dtype == result.dtype ? dot.results(0) : -1;
  int64_t remaining = n;  // shards still to multiply
  // Adds the product of shard (me + shift), held in `held`, into acc.
  auto multiply = [&](int64_t held, int64_t shift) {
    const int64_t start = e.ShardStart(me, shift, n, shard);
    std::vector<int64_t> starts(result.rank(), zero);
    int64_t held_operand = held, other_operand = other;
    if (gm.contracting) {
      other_operand = e.Block(other, gm.other_dim, start, shard);
    } else {
      starts[gm.result_dim] = start;
    }
    const int64_t lhs = gm.side == 0 ? held_operand : other_operand;
    const int64_t rhs = gm.side == 0 ? other_operand : held_operand;
    acc = Accumulate(e, dot, acc, lhs, rhs, starts, --remaining == 0 ? final_id : -1);
  };
  if (!bidirectional || n <= 2) {
    // Step t holds shard me - t: start passing it right, multiply it, take the next one.
    int64_t held = x;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t next = t + 1 < n ? e.RingPermuteStart(held, axes, n, +1) : -1;
      multiply(held, -t);
      if (next >= 0) held = e.Done("ppermute", next);
    }
  } else {
    // Shards me-1 .. me-F arrive from the left, me+1 .. me+B from the right (F + B = n - 1).
    const int64_t forward = n / 2, backward = (n - 1) / 2;
    int64_t from_left = x, from_right = x;
    for (int64_t t = 0; t <= forward; ++t) {
      const int64_t next_left = t < forward ? e.RingPermuteStart(from_left, axes, n, +1) : -1;
      const int64_t next_right = t < backward ? e.RingPermuteStart(from_right, axes, n, -1) : -1;
      if (t == 0) {
        multiply(x, 0);
      } else {
        multiply(from_left, -t);
        if (t <= backward) multiply(from_right, +t);
      }
      if (next_left >= 0) from_left = e.Done("ppermute", next_left);
      if (next_right >= 0) from_right = e.Done("ppermute", next_right);
    }
  }
  if (final_id < 0) e.Convert(acc, result.dtype, dot.results(0));
  return e.Take();
}

std::vector<ir::Op> MatmulReduceScatterRing(const MatmulScatter& ms, OpEmitter& e) {
  const ir::Op& dot = *ms.dot;
  const AxisNames& axes = ms.scatter->psum_scatter().axes();
  const int64_t n = ms.n;
  const int64_t x = dot.operands(ms.side);
  const int64_t other = dot.operands(1 - ms.side);
  const int64_t block = e.Type(x).dims[ms.dim] / n;
  const ir::ShapedType result = ir::FromProto(ms.scatter->result_types(0));
  const ir::DType acc_dtype = AccumulatorType(result.dtype, /*summed=*/true);
  const int64_t me = e.AxisIndex(axes);
  const int64_t zero = e.ScalarS32(0);
  const int64_t final_id = acc_dtype == result.dtype ? ms.scatter->results(0) : -1;
  // Step t works on block me - 1 - t: the running sum of block k starts on device k + 1 and
  // ends, after n - 1 hops to the right, on device k with every device's product added.
  auto operands = [&](int64_t t) {
    const int64_t rows = e.Block(x, ms.dim, e.ShardStart(me, -1 - t, n, block), block);
    return ms.side == 0 ? std::vector<int64_t>{rows, other} : std::vector<int64_t>{other, rows};
  };
  std::vector<int64_t> first = operands(0);
  ir::Op product;
  product.set_opcode("dot_general");
  *product.mutable_dot_general() = dot.dot_general();
  product.mutable_dot_general()->set_preferred_element_type(ir::ToProto(acc_dtype));
  int64_t acc = e.Emit(std::move(product), first, n == 1 ? final_id : -1);
  for (int64_t t = 1; t < n; ++t) {
    const int64_t in_flight = e.RingPermuteStart(acc, axes, n, +1);
    std::vector<int64_t> mine = operands(t);
    const int64_t received = e.Done("ppermute", in_flight);
    acc = Accumulate(e, dot, received, mine[0], mine[1],
                     std::vector<int64_t>(result.rank(), zero), t + 1 == n ? final_id : -1);
  }
  if (final_id < 0) e.Convert(acc, result.dtype, ms.scatter->results(0));
  return e.Take();
}

}  // namespace shardjit::passes::collective_fusion
