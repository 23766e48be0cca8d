// Partitioning rules of the contractions: reduce_sum/max/min, dot_general, gmm and tgmm. A reduced or
// contracted dimension may stay sharded: each device then reduces its block and the partial
// results are combined across the dimension's axes (psum/pmax/pmin, or psum_scatter).
#include <algorithm>

#include "passes/spmd/rules_internal.h"

namespace shardjit::passes::spmd::internal {
namespace {

using Dims = std::vector<int64_t>;

// Candidates: for a known operand layout, keep the reduced dimensions sharded (local reduce,
// then the matching all-reduce) or gather them first; for each wanted result layout, an operand
// with the reduced dimensions replicated.
std::vector<Strategy> ReduceRule(const OpView& view) {
  const Dims axes = ToDims(view.op->reduce().axes());
  const int64_t rank = view.operand_types[0].rank();
  Dims kept;
  for (int64_t d = 0; d < rank; ++d) {
    if (!Contains(axes, d)) kept.push_back(d);
  }
  auto result_of = [&](const Spec& operand) {
    Spec r = Replicated(kept.size());
    for (size_t j = 0; j < kept.size(); ++j) r.dims[j] = operand.dims[kept[j]];
    return r;
  };
  auto operand_of = [&](const Spec& result) {
    Spec o = Replicated(rank);
    for (size_t j = 0; j < kept.size(); ++j) o.dims[kept[j]] = result.dims[j];
    return o;
  };
  std::vector<Strategy> out;
  auto add = [&](const Spec& operand, AxisList partial) {
    Strategy st;
    st.operands = {operand};
    st.results = {result_of(operand)};
    st.reduce_axes = std::move(partial);
    out.push_back(std::move(st));
  };
  if (const std::optional<Spec>& s = view.operand_specs[0]) {
    AxisList partial;
    for (int64_t d : axes) partial.insert(partial.end(), s->dims[d].begin(), s->dims[d].end());
    if (!partial.empty()) add(*s, partial);
    add(ClearDims(*s, axes), {});
  }
  for (const Spec& want : view.result_wants[0]) add(operand_of(want), {});
  add(Replicated(rank), {});
  return out;
}

// dot_general's dimensions, each a batch, lhs-free, rhs-free or contracting dimension.
struct DotDims {
  Dims lb, rb, lc, rc, lf, rf;
  int64_t lhs_rank = 0, rhs_rank = 0;
};

DotDims Classify(const OpView& view) {
  const auto& a = view.op->dot_general();
  DotDims d;
  d.lb = ToDims(a.lhs_batch_dims());
  d.rb = ToDims(a.rhs_batch_dims());
  d.lc = ToDims(a.lhs_contracting_dims());
  d.rc = ToDims(a.rhs_contracting_dims());
  d.lhs_rank = view.operand_types[0].rank();
  d.rhs_rank = view.operand_types[1].rank();
  for (int64_t i = 0; i < d.lhs_rank; ++i) {
    if (!Contains(d.lb, i) && !Contains(d.lc, i)) d.lf.push_back(i);
  }
  for (int64_t i = 0; i < d.rhs_rank; ++i) {
    if (!Contains(d.rb, i) && !Contains(d.rc, i)) d.rf.push_back(i);
  }
  return d;
}

// The most layout combinations tried: past it, wanted result layouts are not drawn from, and the
// enumeration stops there (the all-replicated combination comes first).
constexpr int64_t kMaxCombinations = 4096;

// Candidates: every combination of per-dimension layouts drawn from the operands' layouts and
// the wanted result layouts (each axis used once). A contraction over sharded dimensions ends
// with a psum over their axes, or a psum_scatter onto any result dimension.
std::vector<Strategy> DotGeneralRule(const OpView& view) {
  const DotDims d = Classify(view);
  const std::optional<Spec>& lhs = view.operand_specs[0];
  const std::optional<Spec>& rhs = view.operand_specs[1];
  // Logical dimensions: batch, lhs free, rhs free (the result's order), then contracting.
  struct Logical {
    int64_t lhs = -1, rhs = -1, out = -1;
  };
  std::vector<Logical> logical;
  int64_t out = 0;
  for (size_t i = 0; i < d.lb.size(); ++i) logical.push_back({d.lb[i], d.rb[i], out++});
  for (int64_t i : d.lf) logical.push_back({i, -1, out++});
  for (int64_t i : d.rf) logical.push_back({-1, i, out++});
  for (size_t i = 0; i < d.lc.size(); ++i) logical.push_back({d.lc[i], d.rc[i], -1});
  auto options = [&](bool with_wants) {
    std::vector<std::vector<AxisList>> all;
    for (const Logical& l : logical) {
      std::vector<AxisList> o = {{}};
      auto add = [&](const AxisList& axes) {
        if (std::find(o.begin(), o.end(), axes) == o.end()) o.push_back(axes);
      };
      if (lhs && l.lhs >= 0) add(lhs->dims[l.lhs]);
      if (rhs && l.rhs >= 0) add(rhs->dims[l.rhs]);
      if (with_wants && l.out >= 0) {
        for (const Spec& w : view.result_wants[0]) add(w.dims[l.out]);
      }
      all.push_back(std::move(o));
    }
    return all;
  };
  std::vector<std::vector<AxisList>> choices = options(true);
  int64_t combinations = 1;
  for (const auto& c : choices) {
    combinations = std::min<int64_t>(combinations * c.size(), kMaxCombinations + 1);
  }
  if (combinations > kMaxCombinations) choices = options(false);

  std::vector<Strategy> strategies;
  std::vector<size_t> pick(logical.size(), 0);
  for (int64_t tried = 0; tried < kMaxCombinations; ++tried) {
    Strategy st;
    st.operands = {Replicated(d.lhs_rank), Replicated(d.rhs_rank)};
    Spec result = Replicated(out);
    for (size_t k = 0; k < logical.size(); ++k) {
      const AxisList& axes = choices[k][pick[k]];
      if (logical[k].lhs >= 0) st.operands[0].dims[logical[k].lhs] = axes;
      if (logical[k].rhs >= 0) st.operands[1].dims[logical[k].rhs] = axes;
      if (logical[k].out >= 0) {
        result.dims[logical[k].out] = axes;
      } else {
        st.reduce_axes.insert(st.reduce_axes.end(), axes.begin(), axes.end());
      }
    }
    st.results = {result};
    strategies.push_back(st);
    for (int64_t dim = 0; dim < out && !st.reduce_axes.empty(); ++dim) {
      Strategy scatter = st;
      AxisList& axes = scatter.results[0].dims[dim];
      axes.insert(axes.end(), st.reduce_axes.begin(), st.reduce_axes.end());
      scatter.scatter_dim = dim;
      strategies.push_back(std::move(scatter));
    }
    size_t k = 0;
    while (k < pick.size() && ++pick[k] == choices[k].size()) pick[k++] = 0;
    if (k == pick.size()) break;
  }
  return strategies;
}

// gmm / tgmm: the rows of lhs are grouped by data, so the grouped dimension (m) stays whole and
// the groups replicated; n may be sharded (each device computes its columns), and so may k:
// gmm contracts it (partial sums, then psum), tgmm keeps it in its result [g, k, n].
std::vector<Strategy> GroupedMatmulRule(const OpView& view) {
  const bool gmm = ir::PrimOf(*view.op) == ir::Prim::kGmm;
  const bool transposed = gmm && view.op->grouped_matmul().transpose_rhs();
  // Where k and n sit in lhs, rhs and the result (-1: nowhere).
  struct Place {
    int64_t lhs = -1, rhs = -1, out = -1;
  };
  const Place k = gmm ? Place{1, transposed ? 2 : 1, -1} : Place{0, -1, 1};
  const Place n = gmm ? Place{-1, transposed ? 1 : 2, 1} : Place{-1, 1, 2};
  auto candidates = [&](const Place& p) {
    std::vector<AxisList> o = {{}};
    auto add = [&](const AxisList& axes) {
      if (std::find(o.begin(), o.end(), axes) == o.end()) o.push_back(axes);
    };
    if (p.lhs >= 0 && view.operand_specs[0]) add(view.operand_specs[0]->dims[p.lhs]);
    if (p.rhs >= 0 && view.operand_specs[1]) add(view.operand_specs[1]->dims[p.rhs]);
    if (p.out >= 0) {
      for (const Spec& w : view.result_wants[0]) add(w.dims[p.out]);
    }
    return o;
  };
  std::vector<Strategy> out;
  for (const AxisList& k_axes : candidates(k)) {
    for (const AxisList& n_axes : candidates(n)) {
      Strategy st;
      for (const ir::ShapedType& t : view.operand_types) st.operands.push_back(Replicated(t.rank()));
      Spec result = Replicated(view.result_types[0].rank());
      for (const auto& [place, axes] : {std::pair{k, k_axes}, std::pair{n, n_axes}}) {
        if (place.lhs >= 0) st.operands[0].dims[place.lhs] = axes;
        if (place.rhs >= 0) st.operands[1].dims[place.rhs] = axes;
        if (place.out >= 0) result.dims[place.out] = axes;
      }
      if (gmm) st.reduce_axes = k_axes;
      st.results = {result};
      out.push_back(std::move(st));
    }
  }
  return out;
}

}  // namespace

void AddContractionRules(RuleTable& table) {
  table[ir::Prim::kGmm] = GroupedMatmulRule;
  table[ir::Prim::kTgmm] = GroupedMatmulRule;
  for (ir::Prim reduce : {ir::Prim::kReduceSum, ir::Prim::kReduceMax, ir::Prim::kReduceMin}) {
    table[reduce] = ReduceRule;
  }
  table[ir::Prim::kDotGeneral] = DotGeneralRule;
}

}  // namespace shardjit::passes::spmd::internal
