// JVP rules of reduce_prod, cumprod, cummax and cummin, as jax.lax defines them: the JVP of the
// computation JAX differentiates (its _reduce_tree of pairwise products for reduce_prod, its
// associative_scan for the cumulative ops), built from slices, pads and the combining
// primitive (mul, max, min) with that primitive's own JVP rule, so that zeros and ties come out
// as in JAX.
#include <algorithm>
#include <string>

#include "base/status_macros.h"
#include "ir/autodiff.h"
#include "ir/primitive.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Ids = std::vector<int64_t>;
using IdsOr = absl::StatusOr<Ids>;

// A value and its tangent (kZero where zero).
struct Dual {
  int64_t value;
  int64_t tangent;
};

Op Named(std::string_view opcode) {
  Op op;
  op.set_opcode(std::string(opcode));
  return op;
}

// `opcode`(a, b) and its tangent by the primitive's JVP rule.
absl::StatusOr<Dual> Combine(AdEmitter& e, std::string_view opcode, const Dual& a,
                             const Dual& b) {
  const Op op = Named(opcode);
  ASSIGN_OR_RETURN(int64_t value, e.Emit1(op, {a.value, b.value}));
  if (a.tangent == kZero && b.tangent == kZero) return Dual{value, kZero};
  const Primitive* prim = FindPrimitive(opcode);
  const Ids primals{a.value, b.value}, tangents{a.tangent, b.tangent}, results{value};
  ASSIGN_OR_RETURN(Ids t, prim->ad.jvp(e, JvpArgs{op, primals, tangents, results}));
  return Dual{value, t[0]};
}

// x[start:limit:stride] along `axis` (limit < 0: the end).
absl::StatusOr<int64_t> SliceAlong(AdEmitter& e, int64_t x, int64_t axis, int64_t start,
                                   int64_t limit, int64_t stride = 1) {
  const ShapedType type = e.TypeOf(x);
  Op op = Named("slice");
  for (int64_t d = 0; d < type.rank(); ++d) {
    const bool here = d == axis;
    op.mutable_slice()->add_start_indices(here ? start : 0);
    op.mutable_slice()->add_limit_indices(here && limit >= 0 ? limit : type.dims[d]);
    op.mutable_slice()->add_strides(here ? stride : 1);
  }
  return e.Emit1(std::move(op), {x});
}

absl::StatusOr<Dual> SliceDual(AdEmitter& e, const Dual& x, int64_t axis, int64_t start,
                               int64_t limit, int64_t stride = 1) {
  ASSIGN_OR_RETURN(int64_t v, SliceAlong(e, x.value, axis, start, limit, stride));
  int64_t t = kZero;
  if (x.tangent != kZero) {
    ASSIGN_OR_RETURN(t, SliceAlong(e, x.tangent, axis, start, limit, stride));
  }
  return Dual{v, t};
}

// x padded along `axis` (low, high, interior) with `fill` (0 for the tangent).
absl::StatusOr<int64_t> PadAlong(AdEmitter& e, int64_t x, int64_t axis, int64_t low,
                                 int64_t high, int64_t interior, double fill) {
  const ShapedType type = e.TypeOf(x);
  ASSIGN_OR_RETURN(int64_t value, e.Full(fill, {type.dtype, {}}));
  Op op = Named("pad");
  for (int64_t d = 0; d < type.rank(); ++d) {
    PaddingConfigDim* p = op.mutable_pad()->add_padding_config();
    if (d == axis) {
      p->set_low(low);
      p->set_high(high);
      p->set_interior(interior);
    }
  }
  return e.Emit1(std::move(op), {x, value});
}

absl::StatusOr<Dual> PadDual(AdEmitter& e, const Dual& x, int64_t axis, int64_t low,
                             int64_t high, int64_t interior, double fill) {
  ASSIGN_OR_RETURN(int64_t v, PadAlong(e, x.value, axis, low, high, interior, fill));
  int64_t t = kZero;
  if (x.tangent != kZero) {
    ASSIGN_OR_RETURN(t, PadAlong(e, x.tangent, axis, low, high, interior, 0));
  }
  return Dual{v, t};
}

absl::StatusOr<Dual> ConcatDual(AdEmitter& e, const Dual& a, const Dual& b, int64_t axis) {
  Op op = Named("concatenate");
  op.mutable_concatenate()->set_dimension(axis);
  ASSIGN_OR_RETURN(int64_t v, e.Emit1(op, {a.value, b.value}));
  if (a.tangent == kZero && b.tangent == kZero) return Dual{v, kZero};
  ASSIGN_OR_RETURN(int64_t ta, e.Instantiate(a.tangent, e.TypeOf(a.value)));
  ASSIGN_OR_RETURN(int64_t tb, e.Instantiate(b.tangent, e.TypeOf(b.value)));
  ASSIGN_OR_RETURN(int64_t t, e.Emit1(op, {ta, tb}));
  return Dual{v, t};
}

absl::StatusOr<Dual> AddDual(AdEmitter& e, const Dual& a, const Dual& b) {
  ASSIGN_OR_RETURN(int64_t v, e.Binary("add", a.value, b.value));
  ASSIGN_OR_RETURN(int64_t t, e.AddAny(a.tangent, b.tangent));
  return Dual{v, t};
}

// jax's _interleave: a[0], b[0], a[1], b[1], ... along `axis` (a has as many elements as b or
// one more), by padding each with holes and adding.
absl::StatusOr<Dual> Interleave(AdEmitter& e, const Dual& a, const Dual& b, int64_t axis) {
  const int64_t na = e.TypeOf(a.value).dims[axis], nb = e.TypeOf(b.value).dims[axis];
  ASSIGN_OR_RETURN(Dual pa, PadDual(e, a, axis, 0, na == nb ? 1 : 0, 1, 0));
  ASSIGN_OR_RETURN(Dual pb, PadDual(e, b, axis, 1, na == nb ? 0 : 1, 1, 0));
  return AddDual(e, pa, pb);
}

// jax's associative_scan (its odd/even recursion), forward along `axis`.
absl::StatusOr<Dual> AssociativeScan(AdEmitter& e, std::string_view combine, const Dual& x,
                                     int64_t axis) {
  const int64_t n = e.TypeOf(x.value).dims[axis];
  if (n < 2) return x;
  ASSIGN_OR_RETURN(Dual evens, SliceDual(e, x, axis, 0, n - 1, 2));
  ASSIGN_OR_RETURN(Dual odds, SliceDual(e, x, axis, 1, -1, 2));
  ASSIGN_OR_RETURN(Dual reduced, Combine(e, combine, evens, odds));
  ASSIGN_OR_RETURN(Dual odd, AssociativeScan(e, combine, reduced, axis));
  ASSIGN_OR_RETURN(Dual rest, SliceDual(e, x, axis, 2, -1, 2));
  Dual prefix = odd;
  if (n % 2 == 0) {
    const int64_t m = e.TypeOf(odd.value).dims[axis];
    ASSIGN_OR_RETURN(prefix, SliceDual(e, odd, axis, 0, m - 1));
  }
  ASSIGN_OR_RETURN(Dual even, Combine(e, combine, prefix, rest));
  ASSIGN_OR_RETURN(Dual first, SliceDual(e, x, axis, 0, 1));
  ASSIGN_OR_RETURN(even, ConcatDual(e, first, even, axis));
  return Interleave(e, even, odd, axis);
}

absl::StatusOr<Dual> Rev(AdEmitter& e, const Dual& x, int64_t axis) {
  Op op = Named("rev");
  op.mutable_rev()->add_dimensions(axis);
  ASSIGN_OR_RETURN(int64_t v, e.Emit1(op, {x.value}));
  int64_t t = kZero;
  if (x.tangent != kZero) {
    ASSIGN_OR_RETURN(t, e.Emit1(op, {x.tangent}));
  }
  return Dual{v, t};
}

// cumprod / cummax / cummin: the JVP of associative_scan with mul / max / min (reversed: of
// the scan of the reversed operand, reversed back).
AdRules CumulativeRule(std::string_view combine) {
  return {.jvp = [combine](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const CumulativeAttrs& c = a.op.cumulative();
    Dual x{a.primals[0], a.tangents[0]};
    if (c.reverse()) {
      ASSIGN_OR_RETURN(x, Rev(e, x, c.axis()));
    }
    ASSIGN_OR_RETURN(Dual out, AssociativeScan(e, combine, x, c.axis()));
    if (c.reverse()) {
      ASSIGN_OR_RETURN(out, Rev(e, out, c.axis()));
    }
    return Ids{out.tangent};
  }};
}

// reduce_prod: jax's _reduce_prod_jvp_rule, the JVP of a tree of pairwise products over the
// reduced axes (moved to the front and flattened).
AdRules ReduceProdRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const ShapedType type = e.TypeOf(a.primals[0]);
    std::vector<int64_t> axes(a.op.reduce().axes().begin(), a.op.reduce().axes().end());
    std::vector<int64_t> perm = axes, kept;
    int64_t n = 1;
    for (int64_t d : axes) n *= type.dims[d];
    for (int64_t d = 0; d < type.rank(); ++d) {
      if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
      perm.push_back(d);
      kept.push_back(type.dims[d]);
    }
    std::vector<int64_t> shape{n};
    shape.insert(shape.end(), kept.begin(), kept.end());
    auto flat = [&](int64_t x) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t moved, e.Transpose(x, perm));
      return e.Reshape(moved, shape);
    };
    if (n == 0) return Ids{kZero};  // the product of nothing is 1, a constant
    ASSIGN_OR_RETURN(int64_t v, flat(a.primals[0]));
    ASSIGN_OR_RETURN(int64_t t, flat(a.tangents[0]));
    Dual x{v, t};
    while (e.TypeOf(x.value).dims[0] > 1) {
      const int64_t m = e.TypeOf(x.value).dims[0], m1 = (m + 1) / 2;
      ASSIGN_OR_RETURN(Dual first, SliceDual(e, x, 0, 0, m1));
      ASSIGN_OR_RETURN(Dual second, SliceDual(e, x, 0, m1, -1));
      if (m - m1 != m1) {
        ASSIGN_OR_RETURN(second, PadDual(e, second, 0, 0, 1, 0, 1.0));
      }
      ASSIGN_OR_RETURN(x, Combine(e, "mul", first, second));
    }
    ASSIGN_OR_RETURN(int64_t out, e.Reshape(x.tangent, kept));
    return Ids{out};
  }};
}

}  // namespace

AdRules ScanAd(std::string_view name) {
  if (name == "cumprod") return CumulativeRule("mul");
  if (name == "cummax") return CumulativeRule("max");
  if (name == "cummin") return CumulativeRule("min");
  if (name == "reduce_prod") return ReduceProdRule();
  return {};
}

}  // namespace shardjit::ir::prims
