// The rings of collective-fusion.
#include "ir/async.h"
#include "ir/sharding.h"
#include "passes/collective_fusion_internal.h"

namespace shardjit::passes::collective_fusion {

namespace {

// ((me + shift) mod n) * scale, an s32 scalar: where shard (me + shift) starts.
int64_t ShardStart(OpEmitter& e, int64_t me, int64_t shift, int64_t n, int64_t scale) {
  int64_t index = me;
  if (const int64_t s = ((shift % n) + n) % n; s != 0) {
    index = e.Emit("rem", {e.Emit("add", {me, e.S32(s)}), e.S32(n)});
  }
  return scale == 1 ? index : e.Emit("mul", {index, e.S32(scale)});
}

// Starts passing `x` `shift` positions along the ring of `axes` (n members).
int64_t RingPermuteStart(OpEmitter& e, int64_t x, const ir::AxisList& axes, int64_t n,
                         int64_t shift) {
  ir::Op op;
  op.set_opcode(ir::AsyncStartOpcode("ppermute"));
  ir::SetAxisList(axes, op.mutable_ppermute()->mutable_axes());
  for (int64_t i = 0; i < n; ++i) {
    ir::PermutePair* p = op.mutable_ppermute()->add_perm();
    p->set_source(i);
    p->set_target((((i + shift) % n) + n) % n);
  }
  return e.Emit(std::move(op), {x});
}

// x's block of `size` at `start` along `dim`, the other dims whole.
int64_t Block(OpEmitter& e, int64_t x, int64_t dim, int64_t start, int64_t size) {
  const ir::ShapedType& t = e.TypeOf(x);
  ir::Op op;
  op.set_opcode("dynamic_slice");
  std::vector<int64_t> operands = {x};
  const int64_t zero = e.S32(0);
  for (int64_t d = 0; d < t.rank(); ++d) {
    op.mutable_dynamic_slice()->add_slice_sizes(d == dim ? size : t.dims[d]);
    operands.push_back(d == dim ? start : zero);
  }
  return e.Emit(std::move(op), operands);
}

// dot_accumulate of `dot`'s dimension numbers into `acc` (product in acc's dtype) at `starts`.
int64_t Accumulate(OpEmitter& e, const ir::Op& dot, int64_t acc, int64_t lhs, int64_t rhs,
                   const std::vector<int64_t>& starts, int64_t result = -1) {
  ir::Op op;
  op.set_opcode("dot_accumulate");
  *op.mutable_dot_general() = dot.dot_general();
  op.mutable_dot_general()->set_preferred_element_type(ir::ToProto(e.TypeOf(acc).dtype));
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
  const ir::AxisList axes = ir::ToAxisList(gm.gather->all_gather().axes());
  const int64_t x = gm.gather->operands(0);
  const int64_t shard = e.TypeOf(x).dims[gm.dim];
  const int64_t other = dot.operands(1 - gm.side);
  const ir::ShapedType result = ir::FromProto(dot.result_types(0));
  const int64_t n = gm.n;
  const int64_t me = e.AxisIndex(axes);
  const ir::DType acc_dtype = AccumulatorType(result.dtype, gm.contracting);
  int64_t acc = e.Constant({acc_dtype, result.dims}, 0);
  const int64_t zero = e.S32(0);
  const int64_t final_id = acc_dtype == result.dtype ? dot.results(0) : -1;
  int64_t remaining = n;  // shards still to multiply
  // Adds the product of shard (me + shift), held in `held`, into acc.
  auto multiply = [&](int64_t held, int64_t shift) {
    const int64_t start = ShardStart(e, me, shift, n, shard);
    std::vector<int64_t> starts(result.rank(), zero);
    int64_t held_operand = held, other_operand = other;
    if (gm.contracting) {
      other_operand = Block(e, other, gm.other_dim, start, shard);
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
      const int64_t next = t + 1 < n ? RingPermuteStart(e, held, axes, n, +1) : -1;
      multiply(held, -t);
      if (next >= 0) held = e.AsyncDone("ppermute", next);
    }
  } else {
    // Shards me-1 .. me-F arrive from the left, me+1 .. me+B from the right (F + B = n - 1).
    const int64_t forward = n / 2, backward = (n - 1) / 2;
    int64_t from_left = x, from_right = x;
    for (int64_t t = 0; t <= forward; ++t) {
      const int64_t next_left = t < forward ? RingPermuteStart(e, from_left, axes, n, +1) : -1;
      const int64_t next_right = t < backward ? RingPermuteStart(e, from_right, axes, n, -1) : -1;
      if (t == 0) {
        multiply(x, 0);
      } else {
        multiply(from_left, -t);
        if (t <= backward) multiply(from_right, +t);
      }
      if (next_left >= 0) from_left = e.AsyncDone("ppermute", next_left);
      if (next_right >= 0) from_right = e.AsyncDone("ppermute", next_right);
    }
  }
  if (final_id < 0) e.Convert(acc, result.dtype, dot.results(0));
  return e.Take();
}

std::vector<ir::Op> MatmulReduceScatterRing(const MatmulScatter& ms, OpEmitter& e) {
  const ir::Op& dot = *ms.dot;
  const ir::AxisList axes = ir::ToAxisList(ms.scatter->psum_scatter().axes());
  const int64_t n = ms.n;
  const int64_t x = dot.operands(ms.side);
  const int64_t other = dot.operands(1 - ms.side);
  const int64_t block = e.TypeOf(x).dims[ms.dim] / n;
  const ir::ShapedType result = ir::FromProto(ms.scatter->result_types(0));
  const ir::DType acc_dtype = AccumulatorType(result.dtype, /*summed=*/true);
  const int64_t me = e.AxisIndex(axes);
  const int64_t zero = e.S32(0);
  const int64_t final_id = acc_dtype == result.dtype ? ms.scatter->results(0) : -1;
  // Step t works on block me - 1 - t: the running sum of block k starts on device k + 1 and
  // ends, after n - 1 hops to the right, on device k with every device's product added.
  auto operands = [&](int64_t t) {
    const int64_t rows = Block(e, x, ms.dim, ShardStart(e, me, -1 - t, n, block), block);
    return ms.side == 0 ? std::vector<int64_t>{rows, other} : std::vector<int64_t>{other, rows};
  };
  std::vector<int64_t> first = operands(0);
  ir::Op product;
  product.set_opcode("dot_general");
  *product.mutable_dot_general() = dot.dot_general();
  product.mutable_dot_general()->set_preferred_element_type(ir::ToProto(acc_dtype));
  int64_t acc = e.Emit(std::move(product), first, n == 1 ? final_id : -1);
  for (int64_t t = 1; t < n; ++t) {
    const int64_t in_flight = RingPermuteStart(e, acc, axes, n, +1);
    std::vector<int64_t> mine = operands(t);
    const int64_t received = e.AsyncDone("ppermute", in_flight);
    acc = Accumulate(e, dot, received, mine[0], mine[1],
                     std::vector<int64_t>(result.rank(), zero), t + 1 == n ? final_id : -1);
  }
  if (final_id < 0) e.Convert(acc, result.dtype, ms.scatter->results(0));
  return e.Take();
}

}  // namespace shardjit::passes::collective_fusion
