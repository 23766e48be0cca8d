// JVP and transpose rules of the elementwise and math primitives, as jax.lax defines them
// (jax/_src/lax/lax.py): the same formulas, the same choices at ties and zeros (max/min split a
// tie's tangent in halves, pow's derivatives replace zeros, clamp passes the tangent strictly
// inside its bounds).
#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <unordered_map>

#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Ids = std::vector<int64_t>;
using IdsOr = absl::StatusOr<Ids>;

// The tangent of a unary primitive is t * derivative(x, result).
using Derivative = std::function<absl::StatusOr<int64_t>(AdEmitter&, int64_t x, int64_t out)>;

AdRules UnaryRule(Derivative derivative) {
  return {.jvp = [derivative](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    ASSIGN_OR_RETURN(int64_t factor, derivative(e, a.primals[0], a.results[0]));
    ASSIGN_OR_RETURN(int64_t t, e.Binary("mul", a.tangents[0], factor));
    return Ids{t};
  }};
}

// Piecewise constant: zero tangents (jax's defjvp_zero).
AdRules ZeroTangent() {
  return {.jvp = [](AdEmitter&, const JvpArgs& a) -> IdsOr {
    return Ids(a.results.size(), kZero);
  }};
}

absl::StatusOr<int64_t> Const(AdEmitter& e, double v, int64_t like) { return e.FullLike(v, like); }

// x * y and x + y of primal values.
absl::StatusOr<int64_t> Mul(AdEmitter& e, int64_t x, int64_t y) { return e.Binary("mul", x, y); }
absl::StatusOr<int64_t> Add(AdEmitter& e, int64_t x, int64_t y) { return e.Binary("add", x, y); }

// select(x == 0, 1, x) (jax's _replace_zero).
absl::StatusOr<int64_t> ReplaceZero(AdEmitter& e, int64_t x) {
  ASSIGN_OR_RETURN(int64_t zero, Const(e, 0, x));
  ASSIGN_OR_RETURN(int64_t one, Const(e, 1, x));
  ASSIGN_OR_RETURN(int64_t is_zero, e.Compare(x, zero, EQ));
  return e.Select(is_zero, one, x);
}

// Where x is the extreme z: 1, or 0.5 where y is z too (a tie); elsewhere 0 (jax's _balanced_eq).
absl::StatusOr<int64_t> BalancedEq(AdEmitter& e, int64_t x, int64_t z, int64_t y) {
  ASSIGN_OR_RETURN(int64_t x_is, e.Compare(x, z, EQ));
  ASSIGN_OR_RETURN(int64_t y_is, e.Compare(y, z, EQ));
  ASSIGN_OR_RETURN(int64_t one, Const(e, 1, x));
  ASSIGN_OR_RETURN(int64_t half, Const(e, 0.5, x));
  ASSIGN_OR_RETURN(int64_t zero, Const(e, 0, x));
  ASSIGN_OR_RETURN(int64_t share, e.Select(y_is, half, one));
  return e.Select(x_is, share, zero);
}

// Rules of the binary primitives whose tangent is t_x * dx + t_y * dy.
using Partial = std::function<absl::StatusOr<int64_t>(AdEmitter&, int64_t x, int64_t y,
                                                      int64_t out)>;
AdRules BinaryRule(Partial dx, Partial dy) {
  return {.jvp = [dx, dy](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const int64_t x = a.primals[0], y = a.primals[1], out = a.results[0];
    int64_t t = kZero;
    if (a.tangents[0] != kZero) {
      ASSIGN_OR_RETURN(int64_t f, dx(e, x, y, out));
      ASSIGN_OR_RETURN(t, e.Binary("mul", a.tangents[0], f));
    }
    if (a.tangents[1] != kZero) {
      ASSIGN_OR_RETURN(int64_t f, dy(e, x, y, out));
      ASSIGN_OR_RETURN(int64_t ty, e.Binary("mul", a.tangents[1], f));
      ASSIGN_OR_RETURN(t, e.AddAny(t, ty));
    }
    return Ids{t};
  }};
}

// Transposes of the linear elementwise primitives.
absl::StatusOr<int64_t> Neg(AdEmitter& e, int64_t x) { return e.Unary("neg", x); }

AdRules AddRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t t, e.AddAny(a.tangents[0], a.tangents[1]));
            return Ids{t};
          },
          .transpose = [](AdEmitter&, const TransposeArgs& a) -> IdsOr {
            return Ids{a.cotangents[0], a.cotangents[0]};
          }};
}

AdRules SubRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            if (a.tangents[1] == kZero) return Ids{a.tangents[0]};
            if (a.tangents[0] == kZero) {
              ASSIGN_OR_RETURN(int64_t t, Neg(e, a.tangents[1]));
              return Ids{t};
            }
            ASSIGN_OR_RETURN(int64_t t, e.Binary("sub", a.tangents[0], a.tangents[1]));
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            Ids cts{a.cotangents[0], kZero};
            if (a.linear[1]) {
              ASSIGN_OR_RETURN(cts[1], Neg(e, a.cotangents[0]));
            }
            return cts;
          }};
}

AdRules NegRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t t, Neg(e, a.tangents[0]));
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t c, Neg(e, a.cotangents[0]));
            return Ids{c};
          }};
}

// mul is linear in either operand while the other is a constant (a primal value).
AdRules MulRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t tx, e.Scale(a.tangents[0], a.primals[1]));
            ASSIGN_OR_RETURN(int64_t ty, e.Scale(a.tangents[1], a.primals[0]));
            ASSIGN_OR_RETURN(int64_t t, e.AddAny(tx, ty));
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (a.linear[0] && a.linear[1]) {
              return absl::InternalError("mul: transposed with both operands linear");
            }
            Ids cts{kZero, kZero};
            const int i = a.linear[0] ? 0 : 1;
            ASSIGN_OR_RETURN(cts[i], Mul(e, a.cotangents[0], a.operands[1 - i]));
            return cts;
          }};
}

// div is linear in its numerator.
AdRules DivRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            const int64_t y = a.primals[1];
            int64_t t = kZero;
            if (a.tangents[0] != kZero) {
              ASSIGN_OR_RETURN(t, e.Binary("div", a.tangents[0], y));
            }
            if (a.tangents[1] != kZero) {
              ASSIGN_OR_RETURN(int64_t q, e.Binary("div", a.results[0], y));
              ASSIGN_OR_RETURN(int64_t nq, Neg(e, q));
              ASSIGN_OR_RETURN(int64_t ty, e.Binary("mul", a.tangents[1], nq));
              ASSIGN_OR_RETURN(t, e.AddAny(t, ty));
            }
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (a.linear[1]) return absl::InternalError("div: transposed in its denominator");
            ASSIGN_OR_RETURN(int64_t c, e.Binary("div", a.cotangents[0], a.operands[1]));
            return Ids{c, kZero};
          }};
}

// select(p, a, b) is linear in a and b.
AdRules SelectRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            if (a.tangents[1] == kZero && a.tangents[2] == kZero) return Ids{kZero};
            const ShapedType type = e.TypeOf(a.results[0]);
            ASSIGN_OR_RETURN(int64_t ta, e.Instantiate(a.tangents[1], type));
            ASSIGN_OR_RETURN(int64_t tb, e.Instantiate(a.tangents[2], type));
            ASSIGN_OR_RETURN(int64_t t, e.Select(a.primals[0], ta, tb));
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (a.linear[0]) return absl::InternalError("select: transposed in its predicate");
            Ids cts{kZero, kZero, kZero};
            ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, a.operand_types[1]));
            if (a.linear[1]) {
              ASSIGN_OR_RETURN(cts[1], e.Select(a.operands[0], a.cotangents[0], zeros));
            }
            if (a.linear[2]) {
              ASSIGN_OR_RETURN(cts[2], e.Select(a.operands[0], zeros, a.cotangents[0]));
            }
            return cts;
          }};
}

// clamp(lo, x, hi): x's tangent where lo < x < hi, a bound's where x is beyond it.
AdRules ClampRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const int64_t x = a.primals[1];
    const ShapedType type = e.TypeOf(x);
    auto widen = [&](int64_t v) -> absl::StatusOr<int64_t> {  // a scalar bound to x's shape
      if (v == kZero || e.TypeOf(v).dims == type.dims) return v;
      return e.BroadcastInDim(v, type.dims, {});
    };
    ASSIGN_OR_RETURN(int64_t lo, widen(a.primals[0]));
    ASSIGN_OR_RETURN(int64_t hi, widen(a.primals[2]));
    ASSIGN_OR_RETURN(int64_t zeros, e.Full(0, type));
    int64_t t = kZero;
    if (a.tangents[1] != kZero) {
      ASSIGN_OR_RETURN(int64_t above, e.Compare(x, lo, GT));
      ASSIGN_OR_RETURN(int64_t below, e.Compare(x, hi, LT));
      ASSIGN_OR_RETURN(int64_t inside, e.Binary("and", above, below));
      ASSIGN_OR_RETURN(t, e.Select(inside, a.tangents[1], zeros));
    }
    for (int i : {0, 2}) {
      if (a.tangents[i] == kZero) continue;
      ASSIGN_OR_RETURN(int64_t ti, widen(a.tangents[i]));
      ASSIGN_OR_RETURN(int64_t beyond, e.Compare(i == 0 ? lo : hi, x, i == 0 ? GT : LT));
      ASSIGN_OR_RETURN(int64_t part, e.Select(beyond, ti, zeros));
      ASSIGN_OR_RETURN(t, e.AddAny(t, part));
    }
    return Ids{t};
  }};
}

AdRules ConvertRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t t,
                             e.Convert(a.tangents[0], e.TypeOf(a.results[0]).dtype));
            return Ids{t};
          },
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            ASSIGN_OR_RETURN(int64_t c, e.Convert(a.cotangents[0], a.operand_types[0].dtype));
            return Ids{c};
          }};
}

AdRules IntegerPowRule() {
  return {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const int64_t y = a.op.integer_pow().y();
    if (y == 0) return Ids{kZero};
    Op pow;
    pow.set_opcode("integer_pow");
    pow.mutable_integer_pow()->set_y(y - 1);
    ASSIGN_OR_RETURN(int64_t x_pow, e.Emit1(pow, {a.primals[0]}));
    ASSIGN_OR_RETURN(int64_t factor, Const(e, static_cast<double>(y), a.primals[0]));
    ASSIGN_OR_RETURN(factor, Mul(e, factor, x_pow));
    ASSIGN_OR_RETURN(int64_t t, e.Binary("mul", a.tangents[0], factor));
    return Ids{t};
  }};
}

const AdRuleTable& Rules() {
  static const auto* rules = [] {
    auto* m = new AdRuleTable();
    auto& r = *m;
    r["add"] = AddRule();
    r["sub"] = SubRule();
    r["mul"] = MulRule();
    r["div"] = DivRule();
    r["neg"] = NegRule();
    r["select"] = SelectRule();
    r["clamp"] = ClampRule();
    r["convert_element_type"] = ConvertRule();
    r["integer_pow"] = IntegerPowRule();
    for (const char* name : {"floor", "ceil", "round", "sign"}) r[name] = ZeroTangent();
    // rem(x, y) = x - y * trunc(x / y).
    r["rem"] = BinaryRule(
        [](AdEmitter& e, int64_t x, int64_t, int64_t) { return Const(e, 1, x); },
        [](AdEmitter& e, int64_t x, int64_t y, int64_t) -> absl::StatusOr<int64_t> {
          ASSIGN_OR_RETURN(int64_t q, e.Binary("div", x, y));
          ASSIGN_OR_RETURN(int64_t sign, e.Unary("sign", q));
          ASSIGN_OR_RETURN(int64_t abs, e.Unary("abs", q));
          ASSIGN_OR_RETURN(int64_t floor, e.Unary("floor", abs));
          ASSIGN_OR_RETURN(int64_t trunc, Mul(e, sign, floor));
          return Neg(e, trunc);
        });
    for (const char* name : {"max", "min"}) {
      r[name] = BinaryRule(
          [](AdEmitter& e, int64_t x, int64_t y, int64_t z) { return BalancedEq(e, x, z, y); },
          [](AdEmitter& e, int64_t x, int64_t y, int64_t z) { return BalancedEq(e, y, z, x); });
    }
    r["pow"] = BinaryRule(
        [](AdEmitter& e, int64_t x, int64_t y, int64_t) -> absl::StatusOr<int64_t> {
          ASSIGN_OR_RETURN(int64_t zero, Const(e, 0, y));
          ASSIGN_OR_RETURN(int64_t one, Const(e, 1, y));
          ASSIGN_OR_RETURN(int64_t y_is_zero, e.Compare(y, zero, EQ));
          ASSIGN_OR_RETURN(int64_t y1, e.Binary("sub", y, one));
          ASSIGN_OR_RETURN(int64_t p, e.Binary("pow", x, y1));
          ASSIGN_OR_RETURN(int64_t y_nz, ReplaceZero(e, y));
          ASSIGN_OR_RETURN(int64_t jac, Mul(e, y_nz, p));
          return e.Select(y_is_zero, zero, jac);
        },
        [](AdEmitter& e, int64_t x, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
          ASSIGN_OR_RETURN(int64_t x_nz, ReplaceZero(e, x));
          ASSIGN_OR_RETURN(int64_t log, e.Unary("log", x_nz));
          return Mul(e, log, out);
        });
    // atan2(x, y): y / (x^2 + y^2) and -x / (x^2 + y^2).
    auto atan2_denominator = [](AdEmitter& e, int64_t x, int64_t y) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t xx, Mul(e, x, x));
      ASSIGN_OR_RETURN(int64_t yy, Mul(e, y, y));
      return Add(e, xx, yy);
    };
    r["atan2"] = BinaryRule(
        [atan2_denominator](AdEmitter& e, int64_t x, int64_t y,
                            int64_t) -> absl::StatusOr<int64_t> {
          ASSIGN_OR_RETURN(int64_t d, atan2_denominator(e, x, y));
          return e.Binary("div", y, d);
        },
        [atan2_denominator](AdEmitter& e, int64_t x, int64_t y,
                            int64_t) -> absl::StatusOr<int64_t> {
          ASSIGN_OR_RETURN(int64_t d, atan2_denominator(e, x, y));
          ASSIGN_OR_RETURN(int64_t nx, Neg(e, x));
          return e.Binary("div", nx, d);
        });
    r["abs"] = {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
      ASSIGN_OR_RETURN(int64_t zero, Const(e, 0, a.primals[0]));
      ASSIGN_OR_RETURN(int64_t nonneg, e.Compare(a.primals[0], zero, GE));
      ASSIGN_OR_RETURN(int64_t nt, Neg(e, a.tangents[0]));
      ASSIGN_OR_RETURN(int64_t t, e.Select(nonneg, a.tangents[0], nt));
      return Ids{t};
    }};
    r["exp"] = UnaryRule([](AdEmitter&, int64_t, int64_t out) { return out; });
    r["log"] = {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
      ASSIGN_OR_RETURN(int64_t t, e.Binary("div", a.tangents[0], a.primals[0]));
      return Ids{t};
    }};
    r["log1p"] = {.jvp = [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
      ASSIGN_OR_RETURN(int64_t one, Const(e, 1, a.primals[0]));
      ASSIGN_OR_RETURN(int64_t d, Add(e, one, a.primals[0]));
      ASSIGN_OR_RETURN(int64_t t, e.Binary("div", a.tangents[0], d));
      return Ids{t};
    }};
    r["expm1"] = UnaryRule([](AdEmitter& e, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t one, Const(e, 1, out));
      return Add(e, out, one);
    });
    r["tanh"] = UnaryRule([](AdEmitter& e, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t one, Const(e, 1, out));
      ASSIGN_OR_RETURN(int64_t plus, Add(e, one, out));
      ASSIGN_OR_RETURN(int64_t minus, e.Binary("sub", one, out));
      return Mul(e, plus, minus);
    });
    r["logistic"] = UnaryRule([](AdEmitter& e, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t one, Const(e, 1, out));
      ASSIGN_OR_RETURN(int64_t minus, e.Binary("sub", one, out));
      return Mul(e, out, minus);
    });
    r["sqrt"] = UnaryRule([](AdEmitter& e, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t half, Const(e, 0.5, out));
      return e.Binary("div", half, out);
    });
    r["rsqrt"] = UnaryRule([](AdEmitter& e, int64_t x, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t c, Const(e, -0.5, out));
      ASSIGN_OR_RETURN(int64_t q, e.Binary("div", out, x));
      return Mul(e, c, q);
    });
    r["sin"] = UnaryRule([](AdEmitter& e, int64_t x, int64_t) { return e.Unary("cos", x); });
    r["cos"] = UnaryRule([](AdEmitter& e, int64_t x, int64_t) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t s, e.Unary("sin", x));
      return Neg(e, s);
    });
    r["tan"] = UnaryRule([](AdEmitter& e, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t one, Const(e, 1, out));
      ASSIGN_OR_RETURN(int64_t sq, Mul(e, out, out));
      return Add(e, one, sq);
    });
    r["erf"] = UnaryRule([](AdEmitter& e, int64_t x, int64_t) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t c, Const(e, 2 / std::sqrt(std::numbers::pi), x));
      ASSIGN_OR_RETURN(int64_t sq, Mul(e, x, x));
      ASSIGN_OR_RETURN(int64_t nsq, Neg(e, sq));
      ASSIGN_OR_RETURN(int64_t ex, e.Unary("exp", nsq));
      return Mul(e, c, ex);
    });
    r["erf_inv"] = UnaryRule([](AdEmitter& e, int64_t, int64_t out) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(int64_t c, Const(e, std::sqrt(std::numbers::pi) / 2, out));
      ASSIGN_OR_RETURN(int64_t sq, Mul(e, out, out));
      ASSIGN_OR_RETURN(int64_t ex, e.Unary("exp", sq));
      return Mul(e, c, ex);
    });
    return m;
  }();
  return *rules;
}

}  // namespace

AdRules FindAdRules(const AdRuleTable& table, std::string_view name) {
  auto it = table.find(std::string(name));
  return it == table.end() ? AdRules{} : it->second;
}

AdRules ElementwiseAd(std::string_view name) {
  AdRules rules = FindAdRules(Rules(), name);
  rules.batch = ElementwiseBatch();
  return rules;
}

}  // namespace shardjit::ir::prims
