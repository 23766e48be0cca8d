// pallas_call compiled for x86 (backends/x86/pallas_call.h): the compiler's regions, scalar code,
// loads and stores and the tile ops run on the backend's kernels; the other op families are
// compiled in pallas_compile_{control,gemm,peers,masks}.cc.
#include "backends/x86/pallas_compiler.h"

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "backends/reference/pallas.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/pallas.h"
#include "ir/prim.h"
#include "ir/primitive.h"
#include "ir/regions.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {

using ir::Prim;

namespace {

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
    // Shifts by an amount outside [0, 32) give 0, or the sign for the arithmetic right shift.
    case Prim::kShiftLeft:
      return [](int64_t a, int64_t b) {
        return static_cast<uint64_t>(b) < 32 ? Wrap32(static_cast<uint32_t>(a) << b) : int64_t{0};
      };
    case Prim::kShiftRightLogical:
      return [](int64_t a, int64_t b) {
        return static_cast<uint64_t>(b) < 32 ? Wrap32(static_cast<uint32_t>(a) >> b) : int64_t{0};
      };
    case Prim::kShiftRightArithmetic:
      return [](int64_t a, int64_t b) {
        return int64_t{static_cast<int32_t>(a) >> (static_cast<uint64_t>(b) < 32 ? b : 31)};
      };
    default:
      return std::nullopt;
  }
}

// Unary s32 scalar arithmetic beyond neg/not/convert.
std::optional<std::function<int64_t(int64_t)>> ScalarUnary(Prim prim) {
  switch (prim) {
    case Prim::kAbs:
      return [](int64_t a) { return Wrap32(a < 0 ? -a : a); };
    case Prim::kSign:
      return [](int64_t a) { return int64_t{(a > 0) - (a < 0)}; };
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

}  // namespace

int Compiler::DmaDst(const ir::Op& op) const {
  if (ir::PrimOf(op) != Prim::kDmaStart) return -1;
  const int64_t src = op.operands(0);
  return ref_of_.at(op.operands(1 + static_cast<int>(RefRank(src))));
}

absl::StatusOr<std::unique_ptr<CompiledCall>> Compiler::Compile() {
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

void Compiler::CollectStores(const ir::Region& region) {
  for (const ir::Op& op : region.ops()) {
    if (ir::PrimOf(op) == Prim::kRefStore) stored_refs_.insert(ref_of_.at(op.operands(0)));
    if (const int dst = DmaDst(op); dst >= 0) stored_refs_.insert(dst);
    for (const ir::Region* r : ir::Regions(op)) CollectStores(*r);
  }
}

// Whether op (or a region inside it) reads or writes ref `ref` (an op that waits for peers
// may see them write any ref).
bool Compiler::Touches(const ir::Op& op, int ref) const {
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

bool Compiler::Writes(const ir::Op& op, int ref) const {
  if (ir::PrimOf(op) == Prim::kRefStore && ref_of_.at(op.operands(0)) == ref) return true;
  if (DmaDst(op) == ref) return true;
  for (const ir::Region* r : ir::Regions(op)) {
    for (const ir::Op& inner : r->ops()) {
      if (Writes(inner, ref)) return true;
    }
  }
  return false;
}

void Compiler::CountUses(const ir::Region& region, int index, Uses& uses) {
  for (const ir::Op& op : region.ops()) {
    for (int64_t id : op.operands()) ++uses.count[id];
    for (const ir::Region* r : ir::Regions(op)) CountUses(*r, index, uses);
  }
  for (int64_t id : region.results()) ++uses.count[id];
}

Compiler::Uses Compiler::RegionUses(const ir::Region& region) {
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

absl::Status Compiler::CompileRegion(const ir::Region& region, Program& out) {
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

// A reader of value `v` as an s32/pred scalar.
std::function<int64_t(const Frame&)> Compiler::ScalarReader(int64_t id) const {
  const Value v = values_.at(id);
  if (v.kind == Kind::kScalar) {
    return [slot = v.slot](const Frame& f) { return f.scalars[slot]; };
  }
  return [slot = v.slot](const Frame& f) {
    return static_cast<int64_t>(reference::IndexValue(f.tiles[slot], 0));
  };
}

// Operand `id` as a dense tensor.
std::function<ir::Tensor(Frame&)> Compiler::TensorReader(int64_t id) const {
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
std::function<View(Frame&)> Compiler::ViewReader(int64_t id) {
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
std::function<absl::StatusOr<View>(Frame&)> Compiler::WindowOf(const ir::Op& op, int first,
                                                               bool flush, OutputAccess access) {
  return WindowOf(op, 0, first, op.operands_size() - first, op.ref_window().sizes(),
                  op.ref_window().squeezed(), flush, access);
}

// The window of the ref operand `r` whose `rank` starts are the operands from `first` on.
std::function<absl::StatusOr<View>(Frame&)> Compiler::WindowOf(
    const ir::Op& op, int r, int first, int rank,
    const google::protobuf::RepeatedField<int64_t>& window_sizes,
    const google::protobuf::RepeatedField<int64_t>& window_squeezed, bool flush,
    OutputAccess access) {
  const int ref = ref_of_.at(op.operands(r));
  std::vector<std::function<int64_t(const Frame&)>> starts;
  for (int k = first; k < first + rank; ++k) starts.push_back(ScalarReader(op.operands(k)));
  Dims sizes(window_sizes.begin(), window_sizes.end());
  std::vector<bool> squeezed(sizes.size(), false);
  for (int64_t d : window_squeezed) squeezed[d] = true;
  const ir::Op* where = &op;
  const ir::Op* call = &op_;
  const int nsp = static_cast<int>(op_.pallas_call().num_scalar_prefetch());
  const int outputs_begin = nsp + op_.pallas_call().in_specs_size();
  const bool output = ref >= outputs_begin &&
                      ref < outputs_begin + op_.pallas_call().out_specs_size();
  // Writes are deferred only into refs the kernel writes (a store's or a copy's destination).
  const bool settle = flush && stored_refs_.count(ref) != 0;
  return [=](Frame& f) -> absl::StatusOr<View> {
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
    if (output) f.TouchOutput(ref, w, access);
    if (settle) RETURN_IF_ERROR(f.deferred.Settle(w));
    return w;
  };
}

absl::Status Compiler::CompileOp(const ir::Region& region, int i, const Uses& uses,
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
    case Prim::kCompare:  // of s32 or pred scalars (false < true)
      if (IsScalarType(result) && all_scalar()) {
        return ScalarStep<2>(op, Comparison(op.compare().direction()), out);
      }
      break;
    case Prim::kClamp:  // clamp(lo, x, hi)
      if (IsScalarType(result) && all_scalar()) {
        return ScalarStep<3>(op, [](int64_t lo, int64_t x, int64_t hi) {
          return std::min(std::max(x, lo), hi);
        }, out);
      }
      break;
    case Prim::kSelect:
      if (IsScalarType(result) && all_scalar()) {
        return ScalarStep<3>(op, [](int64_t p, int64_t x, int64_t y) { return p != 0 ? x : y; },
                             out);
      }
      break;
    case Prim::kConvertElementType:
    case Prim::kNeg:
    case Prim::kNot:
      if (IsScalarType(result) && all_scalar()) {
        const bool to_pred = result.dtype == ir::DType::kPred;
        return ScalarStep<1>(op, [prim, to_pred](int64_t v) {
          return prim == Prim::kNeg   ? Wrap32(-v)
                 : prim == Prim::kNot ? (to_pred ? int64_t{v == 0} : ~v)
                 : to_pred            ? int64_t{v != 0}
                                      : v;
        }, out);
      }
      break;
    case Prim::kRefLoad:
      return Load(region, i, uses, out);
    case Prim::kRefStore:
      return Store(op, uses, out);
    case Prim::kCond:
      return Cond(op, out);
    case Prim::kForiLoop:
      return ForiLoop(op, out);
    case Prim::kWhileLoop:
      return WhileLoop(op, out);
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
        return ScalarStep<2>(op, *f, out);
      }
      if (auto f = ScalarUnary(prim); f && IsScalarType(result) && all_scalar()) {
        return ScalarStep<1>(op, *f, out);
      }
      break;
  }
  if (prim == Prim::kAdd) {
    if (std::optional<Accumulation> acc = MatchAccumulation(region, i, uses);
        acc && RunsAsGemm(region.ops(acc->dot))) {
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
  // Other dots (batched, of other dtypes) run on the backend's dot_general kernel.
  if (prim == Prim::kDotGeneral && RunsAsGemm(op)) {
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

template <int N, typename Fn>
absl::Status Compiler::ScalarStep(const ir::Op& op, Fn fn, Program& out) {
  Define(op.results(0), Kind::kScalar, ir::FromProto(op.result_types(0)));
  const int slot = values_.at(op.results(0)).slot;
  std::array<std::function<int64_t(const Frame&)>, N> in;
  for (int k = 0; k < N; ++k) in[k] = ScalarReader(op.operands(k));
  out.push_back([=](Frame& f) {
    f.scalars[slot] = std::apply([&](const auto&... x) { return fn(x(f)...); }, in);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status Compiler::Load(const ir::Region& region, int i, const Uses& uses, Program& out) {
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

// The ref whose load `value` is, when that load serves store `store` alone (as the value it
// stores, or as either value of the masked select it stores): the load's step then takes the
// window without settling the writes deferred into it, and the store settles only what it reads
// (the rows a mask copies) and writes, or moves a deferred GEMM into its own window
// (backends/x86/pallas_deferred.h). -1 otherwise.
int Compiler::ReadAtStore(int64_t value, const ir::Op& store, const Uses& uses, Program& out,
                          OutputAccess access) {
  const ir::Op* load = Producer(value);
  auto view = view_ref_.find(value);
  if (load == nullptr || ir::PrimOf(*load) != Prim::kRefLoad || view == view_ref_.end() ||
      uses.count.at(value) != 1 || uses.count.at(store.operands(1)) != 1) {
    return -1;
  }
  const int slot = values_.at(value).slot;
  out.at(load_step_.at(value)) = [window = WindowOf(*load, 1, /*flush=*/false, access),
                                   slot](Frame& f) -> absl::Status {
    ASSIGN_OR_RETURN(f.views[slot], window(f));
    return absl::OkStatus();
  };
  return view->second;
}

absl::Status Compiler::Store(const ir::Op& op, const Uses& uses, Program& out) {
  const int ref = ref_of_.at(op.operands(0));
  // A masked select between a value and the window's old contents: the value where the mask
  // holds is copied in. Only that part of the window is written, so only the writes deferred
  // into it settle (a megablox tile shared by two groups keeps the first group's GEMM deferred
  // while the second stores its rows).
  if (const MaskedSelect* s = MaskedUse(op.operands(1), index_);
      s != nullptr && !s->zero_otherwise && KeepsOldContents(*s, op)) {
    symbolic_uses_[op.operands(1)].insert({&op, 1});
    auto window = WindowOf(op, 2, /*flush=*/false, OutputAccess::kNone);
    auto value = ViewReader(s->value);
    const int lazy_ref = ReadAtStore(s->value, op, uses, out);
    // The old contents are read through the mask alone: nothing deferred into them settles, and
    // a fresh output's block needs no padding for them (the store records the rows it writes).
    ReadAtStore(s->otherwise, op, uses, out, OutputAccess::kNone);
    out.push_back([window, value, mask = s->mask, lazy_ref, ref](Frame& f) -> absl::Status {
      ASSIGN_OR_RETURN(View w, window(f));
      const View x = value(f);
      const MaskBox box = EvalMask(mask, x.dims, f);
      // Whole rows of the window are written, else part of it.
      bool rows = box.intervals && !x.dims.empty();
      for (size_t d = 1; rows && d < x.dims.size(); ++d) {
        rows = box.lo[d] == 0 && box.hi[d] == x.dims[d];
      }
      if (rows) {
        f.StoreOutputRows(ref, w, box.lo[0], box.hi[0]);
      } else {
        f.TouchOutput(ref, w, OutputAccess::kRead);
      }
      if (lazy_ref >= 0) {
        // Whole rows: the accumulator's GEMM writes them in place.
        if (box.intervals && x.dims.size() == 2 && box.lo[1] == 0 && box.hi[1] == x.dims[1]) {
          ASSIGN_OR_RETURN(bool moved, f.deferred.MoveRowsInto(lazy_ref, x, box.lo[0], box.hi[0],
                                                               ref, w));
          if (moved) return absl::OkStatus();
        }
        if (box.intervals && x.dims.size() == 2) {
          RETURN_IF_ERROR(f.deferred.SettleRows(x, box.lo[0], box.hi[0]));
        } else {
          RETURN_IF_ERROR(f.deferred.Settle(x));
        }
      }
      if (box.intervals) {
        RETURN_IF_ERROR(f.deferred.Overwrite(ref, SubView(w, box.lo, box.hi), false).status());
      } else {
        RETURN_IF_ERROR(f.deferred.Settle(w));
      }
      CopyWhere(w, x, box);
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }
  const Value v = values_.at(op.operands(1));
  // A splat constant (a `full`): a fill of the window, which makes writes deferred into it moot
  // (a fill of zeros into scratch is deferred itself).
  if (const ir::Op* c = Producer(op.operands(1));
      c != nullptr && ir::PrimOf(*c) == Prim::kConstant && c->constant().value_size() == 1 &&
      v.kind == Kind::kTile) {
    auto value = TensorReader(op.operands(1));
    auto fill_window = WindowOf(op, 2, /*flush=*/false, OutputAccess::kStore);
    const bool zero_f32 = v.type.dtype == ir::DType::kF32 && c->constant().value(0) == 0 &&
                          !std::signbit(c->constant().value(0));
    out.push_back([=](Frame& f) -> absl::Status {
      ASSIGN_OR_RETURN(View w, fill_window(f));
      ASSIGN_OR_RETURN(bool deferred, f.deferred.Overwrite(ref, w, zero_f32));
      if (!deferred) FillView(w, value(f).data());
      return absl::OkStatus();
    });
    return absl::OkStatus();
  }
  if (v.kind == Kind::kScalar) {
    auto x = ScalarReader(op.operands(1));
    auto window = WindowOf(op, 2);
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
  const int lazy_ref = ReadAtStore(op.operands(1), op, uses, out);
  auto whole_window = WindowOf(op, 2, /*flush=*/true, OutputAccess::kStore);
  out.push_back([=](Frame& f) -> absl::Status {
    ASSIGN_OR_RETURN(View w, whole_window(f));
    const View x = value(f);
    if (lazy_ref >= 0) {
      ASSIGN_OR_RETURN(bool moved, f.deferred.MoveInto(lazy_ref, x, ref, w));
      if (moved) return absl::OkStatus();
      RETURN_IF_ERROR(f.deferred.Settle(x));
    }
    CopyView(w, x);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

// Any other local op: dense operands through the backend's kernel (the reference one where
// it declines). An op of no operands (a constant, an iota) is computed once, here.
absl::Status Compiler::Generic(const ir::Op& op, Program& out) {
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

absl::StatusOr<std::unique_ptr<CompiledCall>> CompileCall(
    const ir::Op& op, const reference::KernelOverrides& kernels) {
  return Compiler(op, kernels).Compile();
}

}  // namespace shardjit::backends::x86::pallas
