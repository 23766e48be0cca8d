// The pallas_call compiler (backends/x86/pallas_compiler.h): selects read through their masks,
// and the steps they make unneeded.
#include "backends/x86/pallas_compiler.h"

#include <algorithm>
#include <cmath>

#include "ir/prim.h"
#include "ir/primitive.h"

namespace shardjit::backends::x86::pallas {

using ir::Prim;

void Compiler::RecordMaskedSelect(const ir::Op& op) {
  if (op.results_size() != 1 || op.result_types(0).dims_size() == 0) return;
  std::optional<MaskSymbols::Select> select = symbols_.SelectOf(op);
  if (!select) return;
  MaskedSelect s{std::move(select->mask), select->value, select->otherwise, select->narrow, false,
                 region_, index_};
  if (const ir::Op* other = Producer(s.otherwise);
      s.narrow == ir::DType::kInvalid && other != nullptr &&
      ir::PrimOf(*other) == Prim::kConstant &&
      other->constant().value_size() == 1 && other->constant().value(0) == 0 &&
      !std::signbit(other->constant().value(0))) {
    s.zero_otherwise = true;
  }
  masked_[op.results(0)] = std::move(s);
}

// The op of the current region defining `id`, or null.
const ir::Op* Compiler::Producer(int64_t id) const {
  auto it = producer_.find(id);
  if (it == producer_.end() || it->second.first != region_) return nullptr;
  return &region_->ops(it->second.second);
}

// Whether no op of the current region strictly between `from` and `to` writes `ref`.
bool Compiler::NoWritesBetween(int ref, int from, int to) const {
  for (int k = from + 1; k < to; ++k) {
    if (Writes(region_->ops(k), ref)) return false;
  }
  return true;
}

// The masked select value `id` is, when op `at` of the current region may read it through its
// mask (its value still unchanged there); null otherwise.
const Compiler::MaskedSelect* Compiler::MaskedUse(int64_t id, int at) const {
  auto it = masked_.find(id);
  if (it == masked_.end() || it->second.region != region_) return nullptr;
  const MaskedSelect& s = it->second;
  if (auto v = view_ref_.find(s.value); v != view_ref_.end()) {
    if (!NoWritesBetween(v->second, s.index, at)) return nullptr;
  }
  return &s;
}

// Whether masked select `s` keeps the old contents of the window `store` writes outside its
// mask (its otherwise is a load of that window, unchanged until the store).
bool Compiler::KeepsOldContents(const MaskedSelect& s, const ir::Op& store) const {
  const ir::Op* load = Producer(s.otherwise);
  if (load == nullptr || ir::PrimOf(*load) != Prim::kRefLoad ||
      load->operands(0) != store.operands(0) ||
      load->ref_window().SerializeAsString() != store.ref_window().SerializeAsString() ||
      !std::equal(load->operands().begin() + 1, load->operands().end(),
                  store.operands().begin() + 2, store.operands().end())) {
    return false;
  }
  return NoWritesBetween(ref_of_.at(store.operands(0)), producer_.at(s.otherwise).second,
                         index_);
}

// Drops the steps of masked selects all of whose uses read them through their masks, then of
// the array ops only dropped steps used (scalars stay: masks read them).
void Compiler::DropUnneeded(const ir::Region& region, const Uses& uses,
                            const std::vector<std::pair<size_t, size_t>>& steps, Program& out) {
  std::unordered_map<int64_t, int> live = uses.count;
  std::vector<int> dead;
  for (int i = 0; i < region.ops_size(); ++i) {
    const ir::Op& op = region.ops(i);
    if (op.results_size() != 1) continue;
    auto m = masked_.find(op.results(0));
    auto u = symbolic_uses_.find(op.results(0));
    if (m != masked_.end() && m->second.region == &region && u != symbolic_uses_.end() &&
        static_cast<int>(u->second.size()) == live[op.results(0)]) {
      dead.push_back(i);
    }
  }
  if (dead.empty()) return;
  auto droppable = [&](const ir::Op& op) {
    if (op.results_size() != 1 || ir::IsRefOp(ir::PrimOf(op))) return false;
    auto v = values_.find(op.results(0));
    if (v == values_.end() || v->second.kind != Kind::kTile) return false;
    const ir::Primitive* prim = ir::FindPrimitive(ir::PrimOf(op));
    return prim != nullptr && (prim->kind == ir::PrimitiveKind::kElementwise ||
                               ir::PrimOf(op) == Prim::kIota ||
                               ir::PrimOf(op) == Prim::kConstant ||
                               ir::PrimOf(op) == Prim::kBroadcastInDim ||
                               ir::PrimOf(op) == Prim::kFusion);
  };
  masked_selects_ += static_cast<int>(dead.size());
  std::vector<bool> dropped(region.ops_size(), false);
  while (!dead.empty()) {
    const int i = dead.back();
    dead.pop_back();
    if (dropped[i]) continue;
    dropped[i] = true;
    for (size_t s = steps[i].first; s < steps[i].second; ++s) out[s] = nullptr;
    const ir::Op& op = region.ops(i);
    auto select = masked_.find(op.results(0));
    for (int k = 0; k < op.operands_size(); ++k) {
      const int64_t id = op.operands(k);
      // The masked uses of a select read its value.
      if (select != masked_.end() && id == select->second.value) continue;
      if (--live[id] > 0) continue;
      auto p = producer_.find(id);
      if (p == producer_.end() || p->second.first != &region) continue;
      if (droppable(region.ops(p->second.second))) dead.push_back(p->second.second);
    }
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const Step& s) { return !s; }),
            out.end());
}

}  // namespace shardjit::backends::x86::pallas
