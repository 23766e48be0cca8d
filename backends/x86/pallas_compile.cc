#include "backends/x86/pallas_program.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "backends/reference/pallas.h"
#include "backends/x86/gemm.h"
#include "backends/x86/pallas_masks.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/collective_groups.h"
#include "ir/pallas.h"
#include "ir/sharding.h"
#include "ir/prim.h"
#include "ir/primitive.h"
#include "ir/regions.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {
namespace {

using ir::Prim;

// Where a value lives while a kernel runs.
enum class Kind {
  kScalar,  // an s32 or pred scalar in an integer slot
  kTile,    // a dense tensor
  kView,    // a window of a ref, read in place
};

struct Value {
  Kind kind = Kind::kTile;
  int slot = 0;
  ir::ShapedType type;
};
// Integer arithmetic of s32 scalars as XLA defines it (wrapping; x / 0 = -1, x % 0 = x).
int64_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

std::optional<std::function<int64_t(int64_t, int64_t)>> ScalarBinary(Prim prim) {
  switch (prim) {
    case Prim::kAdd:
      return [](int64_t a, int64_t b) { return Wrap32(a + b); };
    case Prim::kSub:
      return [](int64_t a, int64_t b) { return Wrap32(a - b); };
    case Prim::kMul:
      return [](int64_t a, int64_t b) { return Wrap32(a * b); };
    case Prim::kDiv:
      return [](int64_t a, int64_t b) { return b == 0 ? int64_t{-1} : Wrap32(a / b); };
    case Prim::kRem:
      return [](int64_t a, int64_t b) { return b == 0 ? a : Wrap32(a % b); };
    case Prim::kMax:
      return [](int64_t a, int64_t b) { return std::max(a, b); };
    case Prim::kMin:
      return [](int64_t a, int64_t b) { return std::min(a, b); };
    case Prim::kAnd:
      return [](int64_t a, int64_t b) { return a & b; };
    case Prim::kOr:
      return [](int64_t a, int64_t b) { return a | b; };
    case Prim::kXor:
      return [](int64_t a, int64_t b) { return a ^ b; };
    default:
      return std::nullopt;
  }
}

std::function<int64_t(int64_t, int64_t)> Comparison(ir::ComparisonDirection d) {
  switch (d) {
    case ir::EQ:
      return [](int64_t a, int64_t b) -> int64_t { return a == b; };
    case ir::NE:
      return [](int64_t a, int64_t b) -> int64_t { return a != b; };
    case ir::LT:
      return [](int64_t a, int64_t b) -> int64_t { return a < b; };
    case ir::LE:
      return [](int64_t a, int64_t b) -> int64_t { return a <= b; };
    case ir::GT:
      return [](int64_t a, int64_t b) -> int64_t { return a > b; };
    default:
      return [](int64_t a, int64_t b) -> int64_t { return a >= b; };
  }
}

bool IsScalarType(const ir::ShapedType& t) {
  return t.rank() == 0 && (t.dtype == ir::DType::kS32 || t.dtype == ir::DType::kPred);
}
// Whether product `next` continues `pending` along k: the same C window, shapes and strides, its
// A and B the blocks just past the pending ones' along k.
bool Continues(const GemmArgs& pending, const GemmArgs& next) {
  const int64_t elem = GemmInputBytes(next.type);
  return pending.type == next.type && pending.c == next.c && pending.ldc == next.ldc &&
         pending.shape.m == next.shape.m && pending.shape.n == next.shape.n &&
         pending.a_row_stride == next.a_row_stride && pending.a_col_stride == next.a_col_stride &&
         pending.b_row_stride == next.b_row_stride && pending.b_col_stride == next.b_col_stride &&
         static_cast<const char*>(next.a) ==
             static_cast<const char*>(pending.a) + pending.shape.k * pending.a_col_stride * elem &&
         static_cast<const char*>(next.b) ==
             static_cast<const char*>(pending.b) + pending.shape.k * pending.b_row_stride * elem;
}

// `op` (an elementwise op of one array result) as a fusion op of that one op; null for others.
std::shared_ptr<const ir::Op> SingleOpFusion(const ir::Op& op, const ir::Primitive& prim,
                                             const std::vector<ir::ShapedType>& operand_types) {
  if (prim.kind != ir::PrimitiveKind::kElementwise || op.results_size() != 1 ||
      op.result_types(0).dims_size() == 0) {
    return nullptr;
  }
  auto fusion = std::make_shared<ir::Op>();
  fusion->set_opcode("fusion");
  fusion->add_results(op.results(0));
  *fusion->add_result_types() = op.result_types(0);
  ir::Region& body = *fusion->mutable_fusion()->mutable_body();
  ir::Op inner = op;
  inner.clear_loc();
  for (int k = 0; k < op.operands_size(); ++k) {
    fusion->add_operands(op.operands(k));
    ir::Param& p = *body.add_params();
    p.set_id(k);
    *p.mutable_type() = ir::ToProto(operand_types[k]);
    inner.set_operands(k, k);
  }
  inner.set_results(0, op.operands_size());
  body.add_results(op.operands_size());
  *body.add_ops() = std::move(inner);
  return fusion;
}
class Compiler {
 public:
  Compiler(const ir::Op& op, const reference::KernelOverrides& kernels)
      : op_(op),
        a_(op.pallas_call()),
        kernels_(kernels),
        symbols_([this](int64_t id) -> std::optional<ScalarTerm> {
          auto it = values_.find(id);
          if (it == values_.end() || it->second.kind != Kind::kScalar ||
              it->second.type.dtype != ir::DType::kS32) {
            return std::nullopt;
          }
          return ScalarTerm{it->second.slot};
        }) {}

  absl::StatusOr<std::unique_ptr<CompiledCall>> Compile() {
    auto call = std::make_unique<CompiledCall>();
    call->op = &op_;
    const int nsp = static_cast<int>(a_.num_scalar_prefetch());
    const ir::Region& kernel = a_.kernel();
    call->num_refs = kernel.params_size();
    for (int p = 0; p < kernel.params_size(); ++p) {
      ref_of_[kernel.params(p).id()] = p;
      ref_types_.push_back(ir::FromProto(kernel.params(p).type()));
      call->has_semaphores |= kernel.params(p).type().semaphore() != ir::NOT_SEMAPHORE;
    }
    CollectStores(kernel);
    for (int d = 0; d < a_.grid_size(); ++d) call->grid_slots.push_back(NewScalar());
    for (int k = 0; k < a_.in_specs_size() + a_.out_specs_size(); ++k) {
      const bool output = k >= a_.in_specs_size();
      const int i = output ? k - a_.in_specs_size() : k;
      SpecPlan plan;
      plan.spec = output ? &a_.out_specs(i) : &a_.in_specs(i);
      plan.name = fmt::format("{}[{}]", output ? "out_specs" : "in_specs", i);
      plan.output = output;
      plan.array = i;
      plan.ref = nsp + k;
      // Inputs the kernel (or a peer's dma_start) writes are copies.
      plan.copy = !output && stored_refs_.count(plan.ref);
      if (!plan.spec->whole()) {
        const ir::Region& map = plan.spec->index_map();
        for (int p = 0; p < map.params_size(); ++p) {
          if (p < a_.grid_size()) {
            values_[map.params(p).id()] = {Kind::kScalar, call->grid_slots[p],
                                           ir::ShapedType{ir::DType::kS32, {}}};
          } else {
            ref_of_[map.params(p).id()] = p - a_.grid_size();  // the prefetch refs lead
          }
        }
        RETURN_IF_ERROR(CompileRegion(map, plan.index_map));
        for (int64_t id : map.results()) {
          const Value& v = values_.at(id);
          if (v.kind != Kind::kScalar) return Unsupported("an index map computes on arrays");
          plan.index_results.push_back(v.slot);
        }
        Dims extents;
        for (int d = 0; d < plan.spec->block_shape_size(); ++d) {
          extents.push_back(ir::BlockExtent(*plan.spec, d));
        }
        plan.padded_strides = RowMajor(extents);
      }
      call->specs.push_back(std::move(plan));
    }
    RETURN_IF_ERROR(CompileRegion(kernel, call->kernel));
    call->num_scalars = scalars_;
    call->num_tiles = tiles_;
    call->num_views = views_;
    call->masked_selects = masked_selects_;
    // An instance runs its grid in order on one thread (peers meet it step by step).
    for (int d = 0; d < a_.dimension_semantics_size() &&
                    a_.dimension_semantics(d) == ir::PARALLEL && !call->has_semaphores;
         ++d) {
      call->leading_parallel = d + 1;
    }
    return call;
  }

 private:
  static absl::Status Unsupported(const std::string& why) {
    return absl::UnimplementedError("pallas_call: not compiled: " + why);
  }
  int NewScalar() { return scalars_++; }

  // The ref a dma_start writes (its dst), or -1.
  int DmaDst(const ir::Op& op) const {
    if (ir::PrimOf(op) != Prim::kDmaStart) return -1;
    const int64_t src = op.operands(0);
    return ref_of_.at(op.operands(1 + static_cast<int>(RefRank(src))));
  }
  int64_t RefRank(int64_t id) const {
    return static_cast<int64_t>(ref_types_.at(ref_of_.at(id)).dims.size());
  }

  void CollectStores(const ir::Region& region) {
    for (const ir::Op& op : region.ops()) {
      if (ir::PrimOf(op) == Prim::kRefStore) stored_refs_.insert(ref_of_.at(op.operands(0)));
      if (const int dst = DmaDst(op); dst >= 0) stored_refs_.insert(dst);
      for (const ir::Region* r : ir::Regions(op)) CollectStores(*r);
    }
  }

  // Whether op (or a region inside it) reads or writes ref `ref` (an op that waits for peers
  // may see them write any ref).
  bool Touches(const ir::Op& op, int ref) const {
    const Prim prim = ir::PrimOf(op);
    if ((prim == Prim::kRefLoad || prim == Prim::kRefStore) && ref_of_.at(op.operands(0)) == ref) {
      return true;
    }
    if (ir::IsSemaphoreOp(prim)) return true;
    for (const ir::Region* r : ir::Regions(op)) {
      for (const ir::Op& inner : r->ops()) {
        if (Touches(inner, ref)) return true;
      }
    }
    return false;
  }
  bool Writes(const ir::Op& op, int ref) const {
    if (ir::PrimOf(op) == Prim::kRefStore && ref_of_.at(op.operands(0)) == ref) return true;
    if (DmaDst(op) == ref) return true;
    for (const ir::Region* r : ir::Regions(op)) {
      for (const ir::Op& inner : r->ops()) {
        if (Writes(inner, ref)) return true;
      }
    }
    return false;
  }

  // Uses of each value in `region` (nested regions included) and the index of the last op of
  // `region` using it.
  struct Uses {
    std::unordered_map<int64_t, int> count;
    std::unordered_map<int64_t, int> last;
  };
  static void CountUses(const ir::Region& region, int index, Uses& uses) {
    for (const ir::Op& op : region.ops()) {
      for (int64_t id : op.operands()) ++uses.count[id];
      for (const ir::Region* r : ir::Regions(op)) CountUses(*r, index, uses);
    }
    for (int64_t id : region.results()) ++uses.count[id];
  }
  static Uses RegionUses(const ir::Region& region) {
    Uses uses;
    for (int i = 0; i < region.ops_size(); ++i) {
      const ir::Op& op = region.ops(i);
      for (int64_t id : op.operands()) {
        ++uses.count[id];
        uses.last[id] = i;
      }
      for (const ir::Region* r : ir::Regions(op)) {
        Uses inner;
        CountUses(*r, i, inner);
        for (const auto& [id, n] : inner.count) {
          uses.count[id] += n;
          uses.last[id] = i;
        }
      }
    }
    for (int64_t id : region.results()) {
      ++uses.count[id];
      uses.last[id] = region.ops_size();
    }
    return uses;
  }

  absl::Status CompileRegion(const ir::Region& region, Program& out) {
    const Uses uses = RegionUses(region);
    std::unordered_set<int> skipped;
    struct Restore {
      Compiler* c;
      const ir::Region* region;
      int index;
      ~Restore() {
        c->region_ = region;
        c->index_ = index;
      }
    } restore{this, region_, index_};
    region_ = &region;
    std::vector<std::pair<size_t, size_t>> steps(region.ops_size(), {0, 0});
    for (int i = 0; i < region.ops_size(); ++i) {
      for (int64_t id : region.ops(i).results()) producer_[id] = {&region, i};
    }
    for (int i = 0; i < region.ops_size(); ++i) {
      if (skipped.count(i)) continue;
      index_ = i;
      const size_t begin = out.size();
      RETURN_IF_ERROR(CompileOp(region, i, uses, skipped, out));
      steps[i] = {begin, out.size()};
    }
    DropUnneeded(region, uses, steps, out);
    return absl::OkStatus();
  }

  // select(mask, value, otherwise) whose mask MaskSymbols knows: its uses that read it through
  // the mask (a dot operand, a store of a window's old contents outside the mask) skip the
  // select and the mask's own computation.
  struct MaskedSelect {
    Mask mask;
    int64_t value = 0, otherwise = 0;
    bool zero_otherwise = false;
    const ir::Region* region = nullptr;
    int index = 0;
  };
  void RecordMaskedSelect(const ir::Op& op) {
    if (op.results_size() != 1 || op.result_types(0).dims_size() == 0) return;
    std::optional<MaskSymbols::Select> select = symbols_.SelectOf(op);
    if (!select) return;
    MaskedSelect s{std::move(select->mask), select->value, select->otherwise, false, region_,
                   index_};
    if (const ir::Op* other = Producer(s.otherwise);
        other != nullptr && ir::PrimOf(*other) == Prim::kConstant &&
        other->constant().value_size() == 1 && other->constant().value(0) == 0 &&
        !std::signbit(other->constant().value(0))) {
      s.zero_otherwise = true;
    }
    masked_[op.results(0)] = std::move(s);
  }
  // The op of the current region defining `id`, or null.
  const ir::Op* Producer(int64_t id) const {
    auto it = producer_.find(id);
    if (it == producer_.end() || it->second.first != region_) return nullptr;
    return &region_->ops(it->second.second);
  }
  // Whether no op of the current region strictly between `from` and `to` writes `ref`.
  bool NoWritesBetween(int ref, int from, int to) const {
    for (int k = from + 1; k < to; ++k) {
      if (Writes(region_->ops(k), ref)) return false;
    }
    return true;
  }
  // The masked select value `id` is, when op `at` of the current region may read it through its
  // mask (its value still unchanged there); null otherwise.
  const MaskedSelect* MaskedUse(int64_t id, int at) const {
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
  bool KeepsOldContents(const MaskedSelect& s, const ir::Op& store) const {
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
  void DropUnneeded(const ir::Region& region, const Uses& uses,
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

  // A reader of value `v` as an s32/pred scalar.
  std::function<int64_t(const Frame&)> ScalarReader(int64_t id) const {
    const Value v = values_.at(id);
    if (v.kind == Kind::kScalar) {
      return [slot = v.slot](const Frame& f) { return f.scalars[slot]; };
    }
    return [slot = v.slot](const Frame& f) {
      return static_cast<int64_t>(reference::IndexValue(f.tiles[slot], 0));
    };
  }

  // Operand `id` as a dense tensor.
  std::function<ir::Tensor(Frame&)> TensorReader(int64_t id) const {
    const Value v = values_.at(id);
    switch (v.kind) {
      case Kind::kScalar:
        return [slot = v.slot, type = v.type](Frame& f) {
          return ir::Tensor::FromDoubles(type, {static_cast<double>(f.scalars[slot])},
                                         f.allocator);
        };
      case Kind::kTile:
        return [slot = v.slot](Frame& f) { return f.tiles[slot]; };
      case Kind::kView:
        break;
    }
    return [slot = v.slot, type = v.type](Frame& f) {
      ir::Tensor t = ir::Tensor::Empty(type, f.allocator);
      CopyView(DenseView(t), f.views[slot]);
      return t;
    };
  }

  // Operand `id` as a view (tiles as dense views).
  std::function<View(Frame&)> ViewReader(int64_t id) {
    const Value v = values_.at(id);
    if (v.kind == Kind::kView) return [slot = v.slot](Frame& f) { return f.views[slot]; };
    auto tensor = TensorReader(id);
    if (v.kind == Kind::kTile) {
      return [slot = v.slot](Frame& f) { return DenseView(f.tiles[slot]); };
    }
    return [tensor, slot = tiles_++](Frame& f) {
      f.tiles[slot] = tensor(f);
      return DenseView(f.tiles[slot]);
    };
  }

  // The window of ref_load / ref_store `op` (starts from operand `first` on) at run time, checked
  // against the ref.
  // `flush`: run a pending GEMM into this ref first (every access but the GEMM that extends it).
  std::function<absl::StatusOr<View>(Frame&)> WindowOf(const ir::Op& op, int first,
                                                       bool flush = true) {
    return WindowOf(op, 0, first, op.operands_size() - first, op.ref_window().sizes(),
                    op.ref_window().squeezed(), flush);
  }
  // The window of the ref operand `r` whose `rank` starts are the operands from `first` on.
  std::function<absl::StatusOr<View>(Frame&)> WindowOf(
      const ir::Op& op, int r, int first, int rank,
      const google::protobuf::RepeatedField<int64_t>& window_sizes,
      const google::protobuf::RepeatedField<int64_t>& window_squeezed, bool flush = true) {
    const int ref = ref_of_.at(op.operands(r));
    std::vector<std::function<int64_t(const Frame&)>> starts;
    for (int k = first; k < first + rank; ++k) starts.push_back(ScalarReader(op.operands(k)));
    Dims sizes(window_sizes.begin(), window_sizes.end());
    std::vector<bool> squeezed(sizes.size(), false);
    for (int64_t d : window_squeezed) squeezed[d] = true;
    const ir::Op* where = &op;
    const ir::Op* call = &op_;
    return [=](Frame& f) -> absl::StatusOr<View> {
      if (flush) RETURN_IF_ERROR(f.FlushRef(ref));
      const View& r = f.refs[ref];
      View w{r.data, {}, {}, r.dtype};
      Dims at(starts.size());
      for (size_t d = 0; d < starts.size(); ++d) at[d] = starts[d](f);
      for (size_t d = 0; d < starts.size(); ++d) {
        if (at[d] < 0 || at[d] + sizes[d] > r.dims[d]) {
          return reference::WindowOutsideRef(
              *where, reference::KernelWhere(*call, f.index), {at.begin(), at.end()},
              {sizes.begin(), sizes.end()}, reference::KernelRefName(call->pallas_call(), ref),
              ir::ShapedType{r.dtype, {r.dims.begin(), r.dims.end()}});
        }
        w.data += at[d] * r.strides[d] * ir::DTypeSize(r.dtype);
        if (!squeezed[d]) {
          w.dims.push_back(sizes[d]);
          w.strides.push_back(r.strides[d]);
        }
      }
      return w;
    };
  }

  void Define(int64_t id, Kind kind, const ir::ShapedType& type) {
    const int slot = kind == Kind::kScalar ? scalars_++ : kind == Kind::kTile ? tiles_++ : views_++;
    values_[id] = {kind, slot, type};
  }

  // `ops[i]` = add(load R, dot) whose sum is stored back to the same window of R: the index of
  // the load, the dot and the store, when the GEMM can accumulate into R in place.
  struct Accumulation {
    int load = -1, dot = -1, store = -1;
  };
  std::optional<Accumulation> MatchAccumulation(const ir::Region& region, int add,
                                                const Uses& uses) const {
    const ir::Op& op = region.ops(add);
    if (ir::PrimOf(op) != Prim::kAdd || op.result_types(0).dtype() != ir::F32) return std::nullopt;
    std::unordered_map<int64_t, int> producer;
    for (int i = 0; i < add; ++i) {
      for (int64_t id : region.ops(i).results()) producer[id] = i;
    }
    for (int side = 0; side < 2; ++side) {
      auto l = producer.find(op.operands(side));
      auto d = producer.find(op.operands(1 - side));
      if (l == producer.end() || d == producer.end()) continue;
      const ir::Op& load = region.ops(l->second);
      const ir::Op& dot = region.ops(d->second);
      if (ir::PrimOf(load) != Prim::kRefLoad || ir::PrimOf(dot) != Prim::kDotGeneral) continue;
      if (uses.count.at(op.operands(side)) != 1 || uses.count.at(op.operands(1 - side)) != 1 ||
          uses.count.at(op.results(0)) != 1) {
        continue;
      }
      const int store = uses.last.at(op.results(0));
      if (store >= region.ops_size()) continue;
      const ir::Op& st = region.ops(store);
      if (ir::PrimOf(st) != Prim::kRefStore || st.operands(1) != op.results(0) ||
          st.operands(0) != load.operands(0) ||
          st.ref_window().SerializeAsString() != load.ref_window().SerializeAsString() ||
          !std::equal(st.operands().begin() + 2, st.operands().end(),
                      load.operands().begin() + 1, load.operands().end())) {
        continue;
      }
      // Nothing between the load or the dot and the store may touch R (the GEMM updates it at
      // the dot), and the dot must not read R.
      const int ref = ref_of_.at(load.operands(0));
      bool clear = true;
      for (int i = std::min(l->second, d->second) + 1; i < store && clear; ++i) {
        clear = i == l->second || !Touches(region.ops(i), ref);
      }
      for (int64_t id : dot.operands()) {
        auto m = masked_.find(id);
        for (int64_t read : {id, m != masked_.end() ? m->second.value : id}) {
          auto v = view_ref_.find(read);
          clear = clear && (v == view_ref_.end() || v->second != ref);
        }
      }
      if (!clear) continue;
      return Accumulation{l->second, d->second, store};
    }
    return std::nullopt;
  }

  // A GEMM step for dot_general `op` writing C through `out`; with `accumulate_ref` >= 0,
  // accumulating into that ref's window (and deferred while later steps continue it).
  // `at`: the index of the dot in the current region. An operand that is a masked select of
  // zeros (MaskedUse) is read through its mask: when both operands' masks constrain only the
  // contracting dimension, to the same range, the GEMM runs over that depth; otherwise over a
  // zero-filled copy of the mask's elements.
  absl::StatusOr<Step> GemmStep(const ir::Op& op, std::function<absl::StatusOr<View>(Frame&)> out,
                                int accumulate_ref, int at) {
    const bool accumulate = accumulate_ref >= 0;
    const ir::DotGeneralAttrs& d = op.dot_general();
    if (d.lhs_batch_dims_size() != 0 || d.lhs_contracting_dims_size() != 1) {
      return Unsupported("a batched dot");
    }
    const ir::ShapedType lhs = values_.at(op.operands(0)).type;
    const ir::ShapedType rhs = values_.at(op.operands(1)).type;
    const ir::ShapedType result = ir::FromProto(op.result_types(0));
    if (lhs.rank() != 2 || rhs.rank() != 2 || lhs.dtype != rhs.dtype ||
        (lhs.dtype != ir::DType::kF32 && lhs.dtype != ir::DType::kBF16) ||
        (result.dtype != ir::DType::kF32 && result.dtype != ir::DType::kBF16)) {
      return Unsupported("a dot of these types");
    }
    const int cl = static_cast<int>(d.lhs_contracting_dims(0));
    const int cr = static_cast<int>(d.rhs_contracting_dims(0));
    struct Operand {
      std::function<View(Frame&)> view;
      Mask mask;
      bool depth_only = false;  // the mask constrains only the contracting dimension
    };
    auto operand = [&](int k, int contracting) -> Operand {
      const int64_t id = op.operands(k);
      const MaskedSelect* s = MaskedUse(id, at);
      if (s == nullptr || !s->zero_otherwise) return {ViewReader(id), {}, false};
      symbolic_uses_[id].insert({&op, k});
      return {ViewReader(s->value), s->mask, MaskedDims(s->mask) == std::vector<int>{contracting}};
    };
    const Operand a = operand(0, cl);
    const Operand b = operand(1, cr);
    const GemmType type =
        lhs.dtype == ir::DType::kF32 ? GemmType::kF32F32F32 : GemmType::kBf16Bf16F32;
    const bool out_bf16 = result.dtype == ir::DType::kBF16;
    const GemmShape full{lhs.dims[1 - cl], rhs.dims[1 - cr], lhs.dims[cl]};
    const int64_t elem = ir::DTypeSize(lhs.dtype);
    return Step([=](Frame& f) -> absl::Status {
      ASSIGN_OR_RETURN(View c, out(f));
      if (full.m == 0 || full.n == 0) return absl::OkStatus();
      View va = a.view(f);
      View vb = b.view(f);
      GemmShape shape = full;
      ir::Tensor a_copy, b_copy;  // zero-filled masked operands
      if (!a.mask.empty() || !b.mask.empty()) {
        std::optional<MaskBox> ma, mb;
        if (!a.mask.empty()) ma = EvalMask(a.mask, va.dims, f);
        if (!b.mask.empty()) mb = EvalMask(b.mask, vb.dims, f);
        if (a.depth_only && b.depth_only && ma->intervals && mb->intervals &&
            ma->lo[cl] == mb->lo[cr] && ma->hi[cl] == mb->hi[cr]) {
          va.data += ma->lo[cl] * va.strides[cl] * elem;
          vb.data += mb->lo[cr] * vb.strides[cr] * elem;
          shape.k = ma->hi[cl] - ma->lo[cl];
        } else {
          if (ma) va = MaskedCopy(va, *ma, a_copy, f.allocator);
          if (mb) vb = MaskedCopy(vb, *mb, b_copy, f.allocator);
        }
      }
      if (shape.k == 0) {
        if (!accumulate) std::memset(c.data, 0, shape.m * shape.n * ir::DTypeSize(c.dtype));
        return absl::OkStatus();
      }
      GemmArgs g;
      g.shape = shape;
      g.type = type;
      g.a = va.data;
      g.a_row_stride = va.strides[1 - cl];
      g.a_col_stride = va.strides[cl];
      g.b = vb.data;
      g.b_row_stride = vb.strides[cr];
      g.b_col_stride = vb.strides[1 - cr];
      g.c = c.data;
      g.ldc = c.strides[0];
      g.out_bf16 = out_bf16;
      g.accumulate = accumulate;
      g.parallel = f.gemm_parallel;
      // Keep packed blocks of A: a row of blocks serves every column block of the grid while it
      // is still in L2 (packing it afresh each time is most of a kernel's packing). B's blocks
      // serve only along the row axis: packed afresh.
      if (f.pack_cache != nullptr && type != GemmType::kS8S8S32) {
        g.pack_cache = f.pack_cache.get();
        g.cache_a = f.Immutable(va);
      }
      if (accumulate && !out_bf16 && f.Immutable(va) && f.Immutable(vb)) {
        if (f.pending.active && f.pending.ref == accumulate_ref && Continues(f.pending.args, g)) {
          f.pending.args.shape.k += g.shape.k;
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(f.Flush());
        f.pending = {true, g, accumulate_ref};
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(f.Flush());
      return Gemm(g);
    });
  }

  absl::Status CompileOp(const ir::Region& region, int i, const Uses& uses,
                         std::unordered_set<int>& skipped, Program& out) {
    const ir::Op& op = region.ops(i);
    const Prim prim = ir::PrimOf(op);
    const ir::ShapedType result =
        op.results_size() == 1 ? ir::FromProto(op.result_types(0)) : ir::ShapedType{};
    auto all_scalar = [&] {
      for (int64_t id : op.operands()) {
        if (values_.at(id).kind != Kind::kScalar) return false;
      }
      return true;
    };
    symbols_.Analyze(op);
    if (prim == Prim::kSelect || prim == Prim::kFusion) RecordMaskedSelect(op);
    switch (prim) {
      case Prim::kProgramId:
      case Prim::kNumPrograms: {
        Define(op.results(0), Kind::kScalar, result);
        const int slot = values_.at(op.results(0)).slot;
        const int64_t axis = op.grid_axis().axis();
        if (prim == Prim::kNumPrograms) {
          out.push_back([slot, axis](Frame& f) {
            f.scalars[slot] = f.grid[axis];
            return absl::OkStatus();
          });
        } else {
          out.push_back([slot, axis](Frame& f) {
            f.scalars[slot] = f.index[axis];
            return absl::OkStatus();
          });
        }
        return absl::OkStatus();
      }
      case Prim::kConstant:
        if (IsScalarType(result) && op.constant().value_size() == 1) {
          Define(op.results(0), Kind::kScalar, result);
          const int slot = values_.at(op.results(0)).slot;
          const int64_t v = static_cast<int64_t>(op.constant().value(0));
          out.push_back([slot, v](Frame& f) {
            f.scalars[slot] = v;
            return absl::OkStatus();
          });
          return absl::OkStatus();
        }
        break;
      case Prim::kCompare:
        if (IsScalarType(result) && all_scalar() &&
            values_.at(op.operands(0)).type.dtype == ir::DType::kS32) {
          return ScalarOp(op, Comparison(op.compare().direction()), out);
        }
        break;
      case Prim::kSelect:
        if (IsScalarType(result) && all_scalar()) {
          Define(op.results(0), Kind::kScalar, result);
          const int slot = values_.at(op.results(0)).slot;
          auto p = ScalarReader(op.operands(0)), x = ScalarReader(op.operands(1)),
               y = ScalarReader(op.operands(2));
          out.push_back([=](Frame& f) {
            f.scalars[slot] = p(f) != 0 ? x(f) : y(f);
            return absl::OkStatus();
          });
          return absl::OkStatus();
        }
        break;
      case Prim::kConvertElementType:
      case Prim::kNeg:
      case Prim::kNot:
        if (IsScalarType(result) && all_scalar()) {
          Define(op.results(0), Kind::kScalar, result);
          const int slot = values_.at(op.results(0)).slot;
          auto x = ScalarReader(op.operands(0));
          const bool to_pred = result.dtype == ir::DType::kPred;
          out.push_back([=](Frame& f) {
            const int64_t v = x(f);
            f.scalars[slot] = prim == Prim::kNeg   ? Wrap32(-v)
                              : prim == Prim::kNot ? (to_pred ? int64_t{v == 0} : ~v)
                              : to_pred            ? int64_t{v != 0}
                                                   : v;
            return absl::OkStatus();
          });
          return absl::OkStatus();
        }
        break;
      case Prim::kRefLoad:
        return Load(region, i, uses, out);
      case Prim::kRefStore:
        return Store(op, out);
      case Prim::kCond:
        return Cond(op, out);
      case Prim::kForiLoop:
        return ForiLoop(op, out);
      case Prim::kAxisIndex:
      case Prim::kAxisSize:
        return AxisQuery(op, out);
      case Prim::kSemaphoreSignal:
      case Prim::kSemaphoreWait:
      case Prim::kSemaphoreRead:
      case Prim::kDmaWait:
        return SemaphoreStep(op, out);
      case Prim::kDmaStart:
        return DmaStart(op, out);
      case Prim::kDotGeneral:
        break;
      default:
        if (auto f = ScalarBinary(prim); f && IsScalarType(result) && all_scalar()) {
          return ScalarOp(op, *f, out);
        }
        break;
    }
    if (prim == Prim::kAdd) {
      if (std::optional<Accumulation> acc = MatchAccumulation(region, i, uses)) {
        // The dot was compiled already (it precedes the add): replace its step by a GEMM into
        // the stored window, and drop the load, the add and the store.
        const ir::Op& store = region.ops(acc->store);
        ASSIGN_OR_RETURN(Step gemm, GemmStep(region.ops(acc->dot), WindowOf(store, 2, false),
                                             ref_of_.at(store.operands(0)), acc->dot));
        out[dot_step_.at(region.ops(acc->dot).results(0))] = std::move(gemm);
        out[load_step_.at(region.ops(acc->load).results(0))] = [](Frame&) {
          return absl::OkStatus();
        };
        skipped.insert(acc->store);
        return absl::OkStatus();
      }
    }
    if (prim == Prim::kDotGeneral) {
      Define(op.results(0), Kind::kTile, result);
      const int slot = values_.at(op.results(0)).slot;
      ASSIGN_OR_RETURN(Step gemm,
                       GemmStep(op,
                                [slot, result](Frame& f) -> absl::StatusOr<View> {
                                  f.tiles[slot] = ir::Tensor::Empty(result, f.allocator);
                                  return DenseView(f.tiles[slot]);
                                },
                                -1, i));
      dot_step_[op.results(0)] = out.size();
      out.push_back(std::move(gemm));
      return absl::OkStatus();
    }
    return Generic(op, out);
  }

  absl::Status ScalarOp(const ir::Op& op, std::function<int64_t(int64_t, int64_t)> fn,
                        Program& out) {
    Define(op.results(0), Kind::kScalar, ir::FromProto(op.result_types(0)));
    const int slot = values_.at(op.results(0)).slot;
    auto x = ScalarReader(op.operands(0)), y = ScalarReader(op.operands(1));
    out.push_back([=](Frame& f) {
      f.scalars[slot] = fn(x(f), y(f));
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }

  absl::Status Load(const ir::Region& region, int i, const Uses& uses, Program& out) {
    const ir::Op& op = region.ops(i);
    const ir::ShapedType result = ir::FromProto(op.result_types(0));
    auto window = WindowOf(op, 1);
    if (IsScalarType(result)) {
      Define(op.results(0), Kind::kScalar, result);
      const int slot = values_.at(op.results(0)).slot;
      out.push_back([=](Frame& f) -> absl::Status {
        ASSIGN_OR_RETURN(View w, window(f));
        f.scalars[slot] = result.dtype == ir::DType::kPred
                              ? int64_t{*reinterpret_cast<const uint8_t*>(w.data) != 0}
                              : *reinterpret_cast<const int32_t*>(w.data);
        return absl::OkStatus();
      });
      return absl::OkStatus();
    }
    // Read in place while nothing writes the ref before the value's last use in this region.
    const int ref = ref_of_.at(op.operands(0));
    const int last = uses.last.count(op.results(0)) ? uses.last.at(op.results(0)) : i;
    bool in_place = last < region.ops_size();
    for (int k = i + 1; k <= last && in_place; ++k) in_place = !Writes(region.ops(k), ref);
    load_step_[op.results(0)] = out.size();
    if (in_place) {
      view_ref_[op.results(0)] = ref;
      Define(op.results(0), Kind::kView, result);
      const int slot = values_.at(op.results(0)).slot;
      out.push_back([=](Frame& f) -> absl::Status {
        ASSIGN_OR_RETURN(f.views[slot], window(f));
        return absl::OkStatus();
      });
      return absl::OkStatus();
    }
    Define(op.results(0), Kind::kTile, result);
    const int slot = values_.at(op.results(0)).slot;
    out.push_back([=](Frame& f) -> absl::Status {
      ASSIGN_OR_RETURN(View w, window(f));
      f.tiles[slot] = ir::Tensor::Empty(result, f.allocator);
      CopyView(DenseView(f.tiles[slot]), w);
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }

  absl::Status Store(const ir::Op& op, Program& out) {
    auto window = WindowOf(op, 2);
    // A masked select between a value and the window's old contents: the value where the mask
    // holds is copied in.
    if (const MaskedSelect* s = MaskedUse(op.operands(1), index_);
        s != nullptr && !s->zero_otherwise && KeepsOldContents(*s, op)) {
      symbolic_uses_[op.operands(1)].insert({&op, 1});
      auto value = ViewReader(s->value);
      out.push_back([window, value, mask = s->mask](Frame& f) -> absl::Status {
        ASSIGN_OR_RETURN(View w, window(f));
        const View x = value(f);
        CopyWhere(w, x, EvalMask(mask, x.dims, f));
        return absl::OkStatus();
      });
      return absl::OkStatus();
    }
    const Value v = values_.at(op.operands(1));
    // A splat constant (a `full`): a fill of the window.
    if (const ir::Op* c = Producer(op.operands(1));
        c != nullptr && ir::PrimOf(*c) == Prim::kConstant && c->constant().value_size() == 1 &&
        v.kind == Kind::kTile) {
      auto value = TensorReader(op.operands(1));
      out.push_back([=](Frame& f) -> absl::Status {
        ASSIGN_OR_RETURN(View w, window(f));
        FillView(w, value(f).data());
        return absl::OkStatus();
      });
      return absl::OkStatus();
    }
    if (v.kind == Kind::kScalar) {
      auto x = ScalarReader(op.operands(1));
      out.push_back([=](Frame& f) -> absl::Status {
        ASSIGN_OR_RETURN(View w, window(f));
        if (v.type.dtype == ir::DType::kPred) {
          *reinterpret_cast<uint8_t*>(w.data) = x(f) != 0;
        } else {
          *reinterpret_cast<int32_t*>(w.data) = static_cast<int32_t>(x(f));
        }
        return absl::OkStatus();
      });
      return absl::OkStatus();
    }
    auto value = ViewReader(op.operands(1));
    out.push_back([=](Frame& f) -> absl::Status {
      ASSIGN_OR_RETURN(View w, window(f));
      CopyView(w, value(f));
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }

  absl::Status Cond(const ir::Op& op, Program& out) {
    if (op.operands_size() != 1 || op.results_size() != 0) {
      return Unsupported("a cond with operands or results");
    }
    auto index = ScalarReader(op.operands(0));
    std::vector<Program> branches(op.cond().branches_size());
    for (int b = 0; b < op.cond().branches_size(); ++b) {
      RETURN_IF_ERROR(CompileRegion(op.cond().branches(b), branches[b]));
    }
    out.push_back([index, branches = std::move(branches)](Frame& f) {
      const int64_t n = static_cast<int64_t>(branches.size());
      return RunProgram(branches[std::clamp<int64_t>(index(f), 0, n - 1)], f);
    });
    return absl::OkStatus();
  }

  // fori_loop (static bounds): the body's program run upper - lower times, its index and carries
  // in slots of their own (scalars in integer slots, arrays as dense tiles).
  absl::Status ForiLoop(const ir::Op& op, Program& out) {
    const ir::ForiLoopAttrs& loop = op.fori_loop();
    const ir::Region& body = loop.body();
    if (body.params_size() != op.operands_size() + 1 ||
        body.results_size() != op.operands_size() || op.results_size() != op.operands_size()) {
      return Unsupported("a fori_loop whose carries do not match its operands");
    }
    const int index_slot = NewScalar();
    values_[body.params(0).id()] = {Kind::kScalar, index_slot,
                                    ir::ShapedType{ir::DType::kS32, {}}};
    std::vector<Value> carries;
    std::vector<std::function<int64_t(const Frame&)>> init_scalars;
    std::vector<std::function<ir::Tensor(Frame&)>> init_tiles;
    for (int i = 0; i < op.operands_size(); ++i) {
      const ir::ShapedType t = ir::FromProto(body.params(i + 1).type());
      if (t.ref || t.future) return Unsupported("a fori_loop carrying refs or futures");
      const bool scalar = IsScalarType(t);
      Define(body.params(i + 1).id(), scalar ? Kind::kScalar : Kind::kTile, t);
      carries.push_back(values_.at(body.params(i + 1).id()));
      init_scalars.push_back(scalar ? ScalarReader(op.operands(i)) : nullptr);
      init_tiles.push_back(scalar ? nullptr : TensorReader(op.operands(i)));
    }
    Program program;
    RETURN_IF_ERROR(CompileRegion(body, program));
    std::vector<std::function<int64_t(const Frame&)>> next_scalars;
    std::vector<std::function<ir::Tensor(Frame&)>> next_tiles;
    for (int i = 0; i < body.results_size(); ++i) {
      const bool scalar = carries[i].kind == Kind::kScalar;
      next_scalars.push_back(scalar ? ScalarReader(body.results(i)) : nullptr);
      next_tiles.push_back(scalar ? nullptr : TensorReader(body.results(i)));
    }
    for (int i = 0; i < op.results_size(); ++i) values_[op.results(i)] = carries[i];
    const int64_t lower = loop.lower(), upper = loop.upper();
    out.push_back([=, program = std::move(program)](Frame& f) -> absl::Status {
      const size_t n = carries.size();
      std::vector<int64_t> scalars(n);
      std::vector<ir::Tensor> tiles(n);
      auto read = [&](const auto& scalar_readers, const auto& tile_readers) {
        for (size_t i = 0; i < n; ++i) {
          if (carries[i].kind == Kind::kScalar) {
            scalars[i] = scalar_readers[i](f);
          } else {
            tiles[i] = tile_readers[i](f);
          }
        }
        // Assigned after all are read: one carry's next value may be another's param.
        for (size_t i = 0; i < n; ++i) {
          if (carries[i].kind == Kind::kScalar) {
            f.scalars[carries[i].slot] = scalars[i];
          } else {
            f.tiles[carries[i].slot] = std::move(tiles[i]);
          }
        }
      };
      read(init_scalars, init_tiles);
      for (int64_t i = lower; i < upper; ++i) {
        f.scalars[index_slot] = i;
        RETURN_IF_ERROR(RunProgram(program, f));
        read(next_scalars, next_tiles);
      }
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }

  // axis_index / axis_size: where the device running the kernel sits in the run's mesh.
  absl::Status AxisQuery(const ir::Op& op, Program& out) {
    Define(op.results(0), Kind::kScalar, ir::FromProto(op.result_types(0)));
    const int slot = values_.at(op.results(0)).slot;
    const ir::AxisList axes = ir::CollectiveAxes(op);
    const bool index = ir::PrimOf(op) == Prim::kAxisIndex;
    const std::string opcode = op.opcode();
    out.push_back([=](Frame& f) -> absl::Status {
      if (f.peers == nullptr || f.peers->mesh().axes_size() == 0) {
        return absl::InvalidArgumentError(
            fmt::format("{}: needs a mapped axis (call the kernel inside shard_map)", opcode));
      }
      if (index) {
        f.scalars[slot] = ir::CombinedAxisIndex(f.peers->mesh(), f.peers->position(), axes);
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(f.scalars[slot], ir::CombinedAxisSize(f.peers->mesh(), axes));
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }

  // The semaphore operand at `k` and its indices: a reader of its slot (an error outside the
  // array) and of its name, and the operand after the indices.
  struct SemaphoreReader {
    std::function<absl::StatusOr<SemaphoreSlot>(const Frame&)> slot;
    std::string name;
    std::vector<int64_t> dims;  // of the semaphore array
    int next = 0;

    // "scratch ref 2[1,0]": how errors name semaphore `flat` of the array (as the interpreter).
    std::string Name(int64_t flat) const {
      std::vector<int64_t> at(dims.size());
      for (size_t d = dims.size(); d-- > 0;) {
        at[d] = flat % dims[d];
        flat /= dims[d];
      }
      return fmt::format("{}[{}]", name, fmt::join(at, ","));
    }
  };
  SemaphoreReader SemaphoreAt(const ir::Op& op, int k) const {
    const int param = ref_of_.at(op.operands(k));
    const ir::ShapedType type = ref_types_.at(param);
    std::vector<std::function<int64_t(const Frame&)>> indices;
    for (size_t d = 0; d < type.dims.size(); ++d) {
      indices.push_back(ScalarReader(op.operands(k + 1 + static_cast<int>(d))));
    }
    const ir::Op* call = &op_;
    const std::string opcode = op.opcode();
    SemaphoreReader r;
    r.name = reference::KernelRefName(a_, param);
    r.dims = type.dims;
    r.next = k + 1 + static_cast<int>(type.dims.size());
    r.slot = [=](const Frame& f) -> absl::StatusOr<SemaphoreSlot> {
      int64_t flat = 0;
      std::vector<int64_t> at;
      bool inside = true;
      for (size_t d = 0; d < indices.size(); ++d) {
        at.push_back(indices[d](f));
        inside = inside && at.back() >= 0 && at.back() < type.dims[d];
        flat = flat * type.dims[d] + at.back();
      }
      if (!inside) {
        return absl::OutOfRangeError(fmt::format(
            "{}: {}: semaphore index ({}) is outside {}", opcode,
            reference::KernelWhere(*call, f.index), fmt::join(at, ","), type.Array().ToString()));
      }
      return SemaphoreSlot{param, flat};
    };
    return r;
  }

  // The device the operands from `k` on name (this one when there are none).
  std::function<absl::StatusOr<int64_t>(const Frame&)> TargetAt(
      const ir::Op& op, int k, const google::protobuf::RepeatedPtrField<std::string>& axes,
      bool logical) const {
    std::vector<std::function<int64_t(const Frame&)>> values;
    for (int i = k; i < op.operands_size(); ++i) values.push_back(ScalarReader(op.operands(i)));
    const std::vector<std::string> names(axes.begin(), axes.end());
    const ir::Op* call = &op_;
    const std::string opcode = op.opcode();
    return [=](const Frame& f) -> absl::StatusOr<int64_t> {
      std::vector<int64_t> v;
      for (const auto& read : values) v.push_back(read(f));
      return TargetPosition(f.peers->mesh(), f.peers->position(), names, logical, v,
                            fmt::format("{}: {}", opcode, reference::KernelWhere(*call, f.index)));
    };
  }

  // semaphore_signal / semaphore_wait / semaphore_read / dma_wait through the kernel's peers.
  absl::Status SemaphoreStep(const ir::Op& op, Program& out) {
    const Prim prim = ir::PrimOf(op);
    SemaphoreReader sem = SemaphoreAt(op, 0);
    std::function<int64_t(const Frame&)> amount = [](const Frame&) { return int64_t{0}; };
    if (prim == Prim::kDmaWait) {
      amount = [bytes = op.dma_wait().bytes()](const Frame&) { return bytes; };
    } else if (prim != Prim::kSemaphoreRead) {
      amount = ScalarReader(op.operands(sem.next));
    }
    std::function<absl::StatusOr<int64_t>(const Frame&)> target;
    if (prim == Prim::kSemaphoreSignal) {
      target = TargetAt(op, sem.next + 1, op.semaphore_signal().device_axes(),
                        op.semaphore_signal().logical_device());
    }
    int slot = -1;
    if (prim == Prim::kSemaphoreRead) {
      Define(op.results(0), Kind::kScalar, ir::FromProto(op.result_types(0)));
      slot = values_.at(op.results(0)).slot;
    }
    const ir::Op* call = &op_;
    const std::string opcode = op.opcode();
    out.push_back([=](Frame& f) -> absl::Status {
      RETURN_IF_ERROR(f.Flush());  // peers may read or write any ref from here on
      ASSIGN_OR_RETURN(SemaphoreSlot s, sem.slot(f));
      const std::string where =
          fmt::format("{}: {}", opcode, reference::KernelWhere(*call, f.index));
      switch (prim) {
        case Prim::kSemaphoreSignal: {
          ASSIGN_OR_RETURN(int64_t to, target(f));
          return f.peers->Signal(to, s, amount(f), where);
        }
        case Prim::kSemaphoreRead:
          f.scalars[slot] = f.peers->Read(s);
          return absl::OkStatus();
        default: {
          return f.peers->Wait(s, amount(f), where, sem.Name(s.index));
        }
      }
    });
    return absl::OkStatus();
  }

  // dma_start: the src window copied into the dst window here or on the target device, counted
  // on the semaphores.
  absl::Status DmaStart(const ir::Op& op, Program& out) {
    const ir::DmaAttrs& a = op.dma();
    const int src_rank = static_cast<int>(RefRank(op.operands(0)));
    const int dst = 1 + src_rank;
    const int dst_rank = static_cast<int>(RefRank(op.operands(dst)));
    auto from = WindowOf(op, 0, 1, src_rank, a.src_sizes(), a.src_squeezed());
    auto to = WindowOf(op, dst, dst + 1, dst_rank, a.dst_sizes(), a.dst_squeezed());
    SemaphoreReader dst_sem = SemaphoreAt(op, dst + 1 + dst_rank);
    int next = dst_sem.next;
    std::optional<SemaphoreReader> src_sem;
    if (a.has_src_sem()) {
      src_sem = SemaphoreAt(op, next);
      next = src_sem->next;
    }
    auto target = TargetAt(op, next, a.device_axes(), a.logical_device());
    const int dst_param = ref_of_.at(op.operands(dst));
    const ir::ShapedType dst_type = ref_types_.at(dst_param).Array();
    const ir::Op* call = &op_;
    const std::string opcode = op.opcode();
    out.push_back([=](Frame& f) -> absl::Status {
      RETURN_IF_ERROR(f.Flush());
      ASSIGN_OR_RETURN(View src, from(f));
      ASSIGN_OR_RETURN(View window, to(f));
      ASSIGN_OR_RETURN(SemaphoreSlot recv, dst_sem.slot(f));
      ASSIGN_OR_RETURN(int64_t device, target(f));
      const int64_t elem = ir::DTypeSize(src.dtype);
      const View& base = f.refs[dst_param];
      WindowCopy copy;
      copy.src = src.data;
      copy.from.strides.assign(src.strides.begin(), src.strides.end());
      copy.dims.assign(src.dims.begin(), src.dims.end());
      copy.elem = elem;
      copy.dst_type = dst_type;
      copy.to.offset = (window.data - base.data) / elem;
      copy.to.strides.assign(window.strides.begin(), window.strides.end());
      std::optional<SemaphoreSlot> send;
      if (src_sem) {
        ASSIGN_OR_RETURN(send, src_sem->slot(f));
      }
      return StartDma(*f.peers, device, copy, base.data, dst_param, recv,
                      send ? &*send : nullptr,
                      fmt::format("{}: {}", opcode, reference::KernelWhere(*call, f.index)));
    });
    return absl::OkStatus();
  }

  // Any other local op: dense operands through the backend's kernel (the reference one where
  // it declines). An op of no operands (a constant, an iota) is computed once, here.
  absl::Status Generic(const ir::Op& op, Program& out) {
    const ir::Primitive* prim = ir::FindPrimitive(ir::PrimOf(op));
    if (prim == nullptr || (prim->kind != ir::PrimitiveKind::kElementwise &&
                            prim->kind != ir::PrimitiveKind::kStructural)) {
      return Unsupported(fmt::format("{} inside a kernel", op.opcode()));
    }
    const reference::Kernel* fallback = reference::FindKernel(op.opcode());
    auto it = kernels_.find(op.opcode());
    const reference::Kernel* kernel = it != kernels_.end() ? &it->second : fallback;
    if (kernel == nullptr) return Unsupported(fmt::format("{} has no kernel", op.opcode()));
    if (op.operands_size() == 0) {
      absl::StatusOr<std::vector<ir::Tensor>> values = (*kernel)(op, {}, nullptr);
      if (!values.ok() && fallback != nullptr && fallback != kernel) {
        values = (*fallback)(op, {}, nullptr);
      }
      if (!values.ok()) return values.status();
      std::vector<int> slots;
      for (int r = 0; r < op.results_size(); ++r) {
        Define(op.results(r), Kind::kTile, ir::FromProto(op.result_types(r)));
        slots.push_back(values_.at(op.results(r)).slot);
      }
      // The program holds the values, so no kernel ever updates them in place.
      out.push_back([slots, values = *std::move(values)](Frame& f) {
        for (size_t r = 0; r < slots.size(); ++r) f.tiles[slots[r]] = values[r];
        return absl::OkStatus();
      });
      return absl::OkStatus();
    }
    std::vector<std::function<ir::Tensor(Frame&)>> readers;
    for (int64_t id : op.operands()) readers.push_back(TensorReader(id));
    // A lone elementwise op of an array runs as a one-op fusion on generated code, where the
    // backend has it (its own kernel where the fusion declines).
    std::vector<ir::ShapedType> operand_types;
    for (int64_t id : op.operands()) operand_types.push_back(values_.at(id).type);
    std::shared_ptr<const ir::Op> fused = SingleOpFusion(op, *prim, operand_types);
    auto fusion_kernel = kernels_.find("fusion");
    const reference::Kernel* first =
        fused != nullptr && fusion_kernel != kernels_.end() ? &fusion_kernel->second : kernel;
    if (first == kernel) fused = nullptr;
    std::vector<int> slots;
    for (int r = 0; r < op.results_size(); ++r) {
      Define(op.results(r), Kind::kTile, ir::FromProto(op.result_types(r)));
      slots.push_back(values_.at(op.results(r)).slot);
    }
    out.push_back([readers, slots, first, fused, kernel, fallback,
                   &op](Frame& f) -> absl::Status {
      std::vector<ir::Tensor> operands;
      operands.reserve(readers.size());
      for (const auto& read : readers) operands.push_back(read(f));
      absl::StatusOr<std::vector<ir::Tensor>> results =
          (*first)(fused != nullptr ? *fused : op, operands, f.allocator);
      if (!results.ok() && absl::IsUnimplemented(results.status()) && first != kernel) {
        results = (*kernel)(op, operands, f.allocator);
      }
      if (!results.ok() && absl::IsUnimplemented(results.status()) && fallback != nullptr &&
          fallback != kernel) {
        results = (*fallback)(op, operands, f.allocator);
      }
      if (!results.ok()) return results.status();
      for (size_t r = 0; r < slots.size(); ++r) f.tiles[slots[r]] = std::move((*results)[r]);
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }

  const ir::Op& op_;
  const ir::PallasCallAttrs& a_;
  const reference::KernelOverrides& kernels_;
  std::unordered_map<int64_t, Value> values_;
  std::unordered_map<int64_t, int> ref_of_;
  std::vector<ir::ShapedType> ref_types_;  // per kernel param
  std::unordered_set<int> stored_refs_;
  std::unordered_map<int64_t, size_t> dot_step_;
  std::unordered_map<int64_t, size_t> load_step_;
  // The ref each in-place loaded value reads.
  std::unordered_map<int64_t, int> view_ref_;
  int scalars_ = 0, tiles_ = 0, views_ = 0;
  int masked_selects_ = 0;
  // The region being compiled and the index of its op being compiled.
  const ir::Region* region_ = nullptr;
  int index_ = 0;
  // The region and index of the op defining each value.
  std::unordered_map<int64_t, std::pair<const ir::Region*, int>> producer_;
  std::unordered_map<int64_t, MaskedSelect> masked_;
  // The (op, operand) pairs reading each masked select through its mask.
  std::unordered_map<int64_t, std::set<std::pair<const ir::Op*, int>>> symbolic_uses_;
  MaskSymbols symbols_;
};
}  // namespace

absl::StatusOr<std::unique_ptr<CompiledCall>> CompileCall(
    const ir::Op& op, const reference::KernelOverrides& kernels) {
  return Compiler(op, kernels).Compile();
}

}  // namespace shardjit::backends::x86::pallas
