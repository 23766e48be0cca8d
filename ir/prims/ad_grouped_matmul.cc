// JVP and transpose rules of gmm and tgmm, as megablox defines them: both are bilinear in lhs
// and rhs; gmm's lhs cotangent is a gmm with the rhs transposed and its rhs cotangent a tgmm;
// tgmm's are gmms of the cotangent. group_sizes and group_offset are integers: no tangents.
#include <string>

#include "base/status_macros.h"
#include "ir/autodiff.h"
#include "ir/dtype.h"
#include "ir/prims/ad_rules.h"

namespace shardjit::ir::prims {
namespace {

using Ids = std::vector<int64_t>;
using IdsOr = absl::StatusOr<Ids>;

// `opcode` (gmm or tgmm) of x and y with op's group operands, its result in `dtype` (x and y
// converted to it first, as gmm takes one dtype).
absl::StatusOr<int64_t> Grouped(AdEmitter& e, const TransposeArgs& a, std::string_view opcode,
                                int64_t x, int64_t y, DType dtype, bool transpose_rhs,
                                int64_t num_actual_groups) {
  Op op;
  op.set_opcode(std::string(opcode));
  GroupedMatmulAttrs* g = op.mutable_grouped_matmul();
  g->set_transpose_rhs(transpose_rhs);
  g->set_preferred_element_type(ToProto(dtype));
  g->set_num_actual_groups(num_actual_groups);
  ASSIGN_OR_RETURN(x, e.Convert(x, dtype));
  ASSIGN_OR_RETURN(y, e.Convert(y, dtype));
  Ids operands{x, y};
  operands.insert(operands.end(), a.operands.begin() + 2, a.operands.end());
  return e.Emit1(std::move(op), operands);
}

absl::StatusOr<int64_t> Transposed2d(AdEmitter& e, int64_t x) { return e.Transpose(x, {1, 0}); }

// Bilinear in operands 0 and 1: the op on (t0, y) plus the op on (x, t1).
JvpRule BilinearJvp() {
  return [](AdEmitter& e, const JvpArgs& a) -> IdsOr {
    const Op attrs = OpAttrs(a.op);
    Ids rest(a.primals.begin() + 2, a.primals.end());
    int64_t t = kZero;
    for (int i : {0, 1}) {
      if (a.tangents[i] == kZero) continue;
      Ids operands{i == 0 ? a.tangents[0] : a.primals[0], i == 1 ? a.tangents[1] : a.primals[1]};
      operands.insert(operands.end(), rest.begin(), rest.end());
      ASSIGN_OR_RETURN(int64_t part, e.Emit1(attrs, operands));
      ASSIGN_OR_RETURN(t, e.AddAny(t, part));
    }
    return Ids{t};
  };
}

AdRules GmmRule() {
  return {.jvp = BilinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (a.linear[0] && a.linear[1]) {
              return absl::InternalError("gmm: transposed with both operands linear");
            }
            const bool t = a.op.grouped_matmul().transpose_rhs();
            const int64_t ct = a.cotangents[0];
            const DType dtype = e.TypeOf(ct).dtype;
            Ids cts(a.operands.size(), kZero);
            if (a.linear[0]) {  // ct [m,n] times rhs[i] transposed
              ASSIGN_OR_RETURN(int64_t c, Grouped(e, a, "gmm", ct, a.operands[1], dtype, !t, 0));
              ASSIGN_OR_RETURN(cts[0], e.Convert(c, a.operand_types[0].dtype));
            } else {  // per group: lhs rows transposed times ct rows (transposed when t)
              const int64_t groups = a.operand_types[1].dims[0];
              ASSIGN_OR_RETURN(int64_t lhs_t, Transposed2d(e, a.operands[0]));
              int64_t c;
              if (t) {
                ASSIGN_OR_RETURN(int64_t ct_t, Transposed2d(e, ct));
                ASSIGN_OR_RETURN(c, Grouped(e, a, "tgmm", ct_t, a.operands[0], dtype, false,
                                            groups));
              } else {
                ASSIGN_OR_RETURN(c, Grouped(e, a, "tgmm", lhs_t, ct, dtype, false, groups));
              }
              ASSIGN_OR_RETURN(cts[1], e.Convert(c, a.operand_types[1].dtype));
            }
            return cts;
          }};
}

AdRules TgmmRule() {
  return {.jvp = BilinearJvp(),
          .transpose = [](AdEmitter& e, const TransposeArgs& a) -> IdsOr {
            if (a.linear[0] && a.linear[1]) {
              return absl::InternalError("tgmm: transposed with both operands linear");
            }
            const int64_t ct = a.cotangents[0];  // [G, k, n]
            const DType dtype = e.TypeOf(ct).dtype;
            Ids cts(a.operands.size(), kZero);
            if (a.linear[0]) {  // lhs [k, m]: (rhs [m,n] times ct[i] transposed) transposed
              ASSIGN_OR_RETURN(int64_t c,
                               Grouped(e, a, "gmm", a.operands[1], ct, dtype, true, 0));
              ASSIGN_OR_RETURN(int64_t ct_lhs, Transposed2d(e, c));
              ASSIGN_OR_RETURN(cts[0], e.Convert(ct_lhs, a.operand_types[0].dtype));
            } else {  // rhs [m, n]: lhs transposed [m, k] times ct[i]
              ASSIGN_OR_RETURN(int64_t lhs_t, Transposed2d(e, a.operands[0]));
              ASSIGN_OR_RETURN(int64_t c, Grouped(e, a, "gmm", lhs_t, ct, dtype, false, 0));
              ASSIGN_OR_RETURN(cts[1], e.Convert(c, a.operand_types[1].dtype));
            }
            return cts;
          }};
}

}  // namespace

AdRules GroupedMatmulAd(std::string_view name) {
  if (name == "gmm") return GmmRule();
  if (name == "tgmm") return TgmmRule();
  return {};
}

}  // namespace shardjit::ir::prims
