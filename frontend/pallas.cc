#include "frontend/pallas.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "frontend/control_flow.h"
#include "frontend/trace_state.h"
#include "ir/pallas.h"
#include "ir/types.h"

namespace shardjit::pl {
namespace {

using shardjit::internal::TraceState;

const ShapedType kIndexType{DType::kS32, {}};

// A traced s32 scalar for `index` (a constant, or a tracer converted to s32).
Tracer IndexTracer(TraceState* t, const Index& index, Loc loc) {
  if (!index.tracer.valid()) return t->Constant(static_cast<double>(index.value), kIndexType, loc);
  if (index.tracer.dtype() == DType::kS32) return index.tracer;
  return lax::convert_element_type(index.tracer, DType::kS32, loc);
}

TraceState* Fail(TraceState* t, absl::Status status, Loc loc) {
  if (t != nullptr) t->RecordError(std::move(status), loc);
  return nullptr;
}

// The ref window op for `idx` on `ref` (ref_load or ref_store): its attributes and starts.
TraceState* Window(const Ref& ref, const std::vector<Indexer>& idx, const char* opcode,
                             ir::Op& op, std::vector<Tracer>& starts, Loc loc) {
  TraceState* t = shardjit::internal::TraceOf({ref.tracer()}, opcode);
  if (t == nullptr || !ref.valid()) return nullptr;
  if (static_cast<int64_t>(idx.size()) > ref.rank()) {
    return Fail(t, absl::InvalidArgumentError(fmt::format(
                       "{}: {} indexers for a ref of rank {} ({})", opcode, idx.size(),
                       ref.rank(), ref.type().ToString())),
                loc);
  }
  op.set_opcode(opcode);
  ir::RefWindowAttrs* w = op.mutable_ref_window();
  for (int64_t d = 0; d < ref.rank(); ++d) {
    const Indexer& ix = d < static_cast<int64_t>(idx.size()) ? idx[d] : Indexer::All();
    if (ix.size() == -1) {
      w->add_sizes(ref.shape()[d]);
      starts.push_back(t->Constant(0, kIndexType, loc));
      continue;
    }
    w->add_sizes(ix.size());
    if (ix.squeeze()) w->add_squeezed(d);
    if (ix.start().tracer.valid() && ix.start().tracer.rank() != 0) {
      return Fail(t, absl::InvalidArgumentError(fmt::format(
                         "{}: the index of dimension {} is {}; expected a scalar", opcode, d,
                         ix.start().tracer.type().ToString())),
                  loc);
    }
    starts.push_back(IndexTracer(t, ix.start(), loc));
  }
  return t;
}

TraceState* KernelTrace(const char* what, Loc loc) {
  TraceState* t = shardjit::internal::CurrentTrace();
  if (t == nullptr) return nullptr;
  if (t->builder().kernel_grid_rank() < 0) {
    return Fail(t, absl::InvalidArgumentError(
                       fmt::format("{}: only allowed inside a pallas_call kernel", what)),
                loc);
  }
  return t;
}

Tracer GridQuery(const char* opcode, int64_t axis, Loc loc) {
  TraceState* t = KernelTrace(opcode, loc);
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode(opcode);
  op.mutable_grid_axis()->set_axis(axis);
  return t->Emit1(std::move(op), {}, loc);
}

// The spec of an operand or result without one: the whole array as one block at (0, ...).
ir::BlockSpec WholeBlock(TraceState* t, const ShapedType& array, int grid_rank,
                         const std::vector<ShapedType>& prefetch_types) {
  ir::BlockSpec spec;
  for (int64_t d : array.dims) spec.add_block_shape(d);
  ir::RegionScope scope(t->builder(), false, grid_rank);
  for (int i = 0; i < grid_rank; ++i) t->AddParam(kIndexType);
  for (const ShapedType& p : prefetch_types) t->AddParam(p.AsRef());
  std::vector<int64_t> zeros;
  for (size_t d = 0; d < array.dims.size(); ++d) {
    zeros.push_back(t->Constant(0, kIndexType, Loc::current()).id());
  }
  *spec.mutable_index_map() = scope.Close(zeros);
  return spec;
}

// The barrier semaphore of the kernel being traced (PallasCallSpec::barrier_semaphore).
thread_local const Ref* current_barrier = nullptr;

// Where a copy's window lies: its sizes, squeezed dimensions and starts.
struct WindowOperands {
  ir::RefWindowAttrs attrs;
  std::vector<Tracer> starts;
};

TraceState* WindowOf(const View& v, const char* opcode, WindowOperands& w, Loc loc) {
  ir::Op op;
  TraceState* t = Window(v.ref(), v.idx(), opcode, op, w.starts, loc);
  if (t != nullptr) w.attrs = op.ref_window();
  return t;
}

// A semaphore operand: the ref and one index per dimension (every dimension indexed by a scalar
// or the array has none).
TraceState* SemaphoreOf(const View& v, const char* opcode, std::vector<Tracer>& operands,
                        Loc loc) {
  TraceState* t = shardjit::internal::TraceOf({v.ref().tracer()}, opcode);
  if (t == nullptr || !v.ref().valid()) return nullptr;
  const Ref& ref = v.ref();
  if (ref.tracer().type().semaphore == ir::Semaphore::kNone) {
    return Fail(t, absl::InvalidArgumentError(fmt::format(
                       "{}: {} is not a semaphore (scratch_shapes: pl::Semaphores or "
                       "pl::DmaSemaphores)", opcode, ref.tracer().type().ToString())),
                loc);
  }
  if (static_cast<int64_t>(v.idx().size()) != ref.rank()) {
    return Fail(t, absl::InvalidArgumentError(fmt::format(
                       "{}: {} indices for the semaphore array {}; pick one semaphore with one "
                       "index per dimension", opcode, v.idx().size(),
                       ref.tracer().type().ToString())),
                loc);
  }
  operands.push_back(ref.tracer());
  for (const Indexer& ix : v.idx()) {
    if (!ix.squeeze()) {
      return Fail(t, absl::InvalidArgumentError(fmt::format(
                         "{}: a semaphore array is indexed by scalars, not windows", opcode)),
                  loc);
    }
    operands.push_back(IndexTracer(t, ix.start(), loc));
  }
  return t;
}

// Appends the device operands of `device` and sets the attrs naming them.
template <typename Attrs>
void AddDevice(TraceState* t, const DeviceId& device, Attrs& attrs, std::vector<Tracer>& operands,
               Loc loc) {
  attrs.set_logical_device(device.logical());
  for (const auto& [axis, index] : device.coords()) {
    if (!device.logical()) attrs.add_device_axes(axis);
    operands.push_back(IndexTracer(t, index, loc));
  }
}

// semaphore_signal (to `device`) or, without one, semaphore_wait of `amount` on `sem`.
void SemaphoreUpdate(const char* opcode, const View& sem, const Index& amount,
                     const DeviceId* device, Loc loc) {
  std::vector<Tracer> operands;
  TraceState* t = SemaphoreOf(sem, opcode, operands, loc);
  if (t == nullptr) return;
  ir::Op op;
  op.set_opcode(opcode);
  operands.push_back(IndexTracer(t, amount, loc));
  if (device != nullptr) AddDevice(t, *device, *op.mutable_semaphore_signal(), operands, loc);
  t->Emit(std::move(op), operands, loc);
}

}  // namespace

void semaphore_signal(View sem, Index inc, DeviceId device, Loc loc) {
  SemaphoreUpdate("semaphore_signal", sem, inc, &device, loc);
}

void semaphore_wait(View sem, Index value, Loc loc) {
  SemaphoreUpdate("semaphore_wait", sem, value, nullptr, loc);
}

Tracer semaphore_read(View sem, Loc loc) {
  std::vector<Tracer> operands;
  TraceState* t = SemaphoreOf(sem, "semaphore_read", operands, loc);
  if (t == nullptr) return Tracer();
  ir::Op op;
  op.set_opcode("semaphore_read");
  return t->Emit1(std::move(op), operands, loc);
}

Ref get_barrier_semaphore(Loc loc) {
  if (current_barrier == nullptr) {
    if (TraceState* t = shardjit::internal::CurrentTrace(); t != nullptr) {
      t->RecordError(absl::InvalidArgumentError(
                         "get_barrier_semaphore: the kernel's pallas_call has no barrier "
                         "semaphore (set PallasCallSpec::barrier_semaphore)"),
                     loc);
    }
    return Ref();
  }
  return *current_barrier;
}

void AsyncCopy::start(Loc loc) const {
  WindowOperands from, to;
  TraceState* t = WindowOf(src_, "dma_start", from, loc);
  if (t == nullptr || WindowOf(dst_, "dma_start", to, loc) == nullptr) return;
  std::vector<Tracer> operands = {src_.ref().tracer()};
  operands.insert(operands.end(), from.starts.begin(), from.starts.end());
  operands.push_back(dst_.ref().tracer());
  operands.insert(operands.end(), to.starts.begin(), to.starts.end());
  if (SemaphoreOf(dst_sem_, "dma_start", operands, loc) == nullptr) return;
  if (src_sem_ && SemaphoreOf(*src_sem_, "dma_start", operands, loc) == nullptr) return;
  ir::Op op;
  op.set_opcode("dma_start");
  ir::DmaAttrs& a = *op.mutable_dma();
  *a.mutable_src_sizes() = from.attrs.sizes();
  *a.mutable_src_squeezed() = from.attrs.squeezed();
  *a.mutable_dst_sizes() = to.attrs.sizes();
  *a.mutable_dst_squeezed() = to.attrs.squeezed();
  a.set_has_src_sem(src_sem_.has_value());
  AddDevice(t, device_, a, operands, loc);
  t->Emit(std::move(op), operands, loc);
}

// Waits on `sem` for the bytes of the window `window`.
static void DmaWait(const View& sem, const View& window, Loc loc) {
  WindowOperands w;
  if (WindowOf(window, "dma_wait", w, loc) == nullptr) return;
  std::vector<Tracer> operands;
  TraceState* t = SemaphoreOf(sem, "dma_wait", operands, loc);
  if (t == nullptr) return;
  int64_t bytes = ir::DTypeSize(window.ref().dtype());
  for (int d = 0; d < w.attrs.sizes_size(); ++d) bytes *= w.attrs.sizes(d);
  ir::Op op;
  op.set_opcode("dma_wait");
  op.mutable_dma_wait()->set_bytes(bytes);
  t->Emit(std::move(op), operands, loc);
}

void AsyncCopy::wait_send(Loc loc) const {
  if (!src_sem_) {
    if (TraceState* t = shardjit::internal::CurrentTrace(); t != nullptr) {
      t->RecordError(absl::InvalidArgumentError(
                         "dma_wait: wait_send of a local copy (it has no send semaphore)"),
                     loc);
    }
    return;
  }
  DmaWait(*src_sem_, src_, loc);
}

void AsyncCopy::wait_recv(Loc loc) const { DmaWait(dst_sem_, dst_, loc); }

void AsyncCopy::wait(Loc loc) const {
  if (src_sem_) wait_send(loc);
  wait_recv(loc);
}

Tracer Ref::load(const std::vector<Indexer>& idx, Loc loc) const {
  ir::Op op;
  std::vector<Tracer> starts;
  TraceState* t = Window(*this, idx, "ref_load", op, starts, loc);
  if (t == nullptr) return Tracer();
  std::vector<Tracer> operands = {value_};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return t->Emit1(std::move(op), operands, loc);
}

void Ref::store(const std::vector<Indexer>& idx, Tracer value, Loc loc) const {
  ir::Op op;
  std::vector<Tracer> starts;
  TraceState* t = Window(*this, idx, "ref_store", op, starts, loc);
  if (t == nullptr) return;
  std::vector<Tracer> operands = {value_, std::move(value)};
  operands.insert(operands.end(), starts.begin(), starts.end());
  t->Emit(std::move(op), operands, loc);
}

Tracer program_id(int64_t axis, Loc loc) { return GridQuery("program_id", axis, loc); }
Tracer num_programs(int64_t axis, Loc loc) { return GridQuery("num_programs", axis, loc); }

void when(Tracer cond, const std::function<void()>& body, Loc loc) {
  lax::cond(
      cond,
      [&](std::vector<Tracer>) {
        body();
        return std::vector<Tracer>{};
      },
      [](std::vector<Tracer>) { return std::vector<Tracer>{}; }, {}, loc);
}

Tracer dot(Tracer a, Tracer b, DType preferred_element_type, bool trans_a, bool trans_b,
           Loc loc) {
  return lax::dot_general(a, b, DotDims{{trans_a ? 0 : 1}, {trans_b ? 1 : 0}},
                          preferred_element_type, loc);
}

std::vector<Tracer> PallasCall::operator()(const std::vector<Tracer>& args, Loc loc) const {
  const size_t num_outputs = spec_.out_shapes.size();
  TraceState* t = shardjit::internal::TraceOf(args, "pallas_call");
  if (t == nullptr) t = shardjit::internal::CurrentTrace();
  if (t == nullptr) return std::vector<Tracer>(num_outputs);
  for (const Tracer& a : args) {
    if (!a.valid()) return std::vector<Tracer>(num_outputs);
  }
  auto fail = [&](std::string message) {
    const std::string name = spec_.name.empty() ? "" : " " + spec_.name;
    t->RecordError(absl::InvalidArgumentError(fmt::format("pallas_call{}: {}", name, message)),
                   loc);
    return std::vector<Tracer>(num_outputs);
  };
  const int nsp = spec_.num_scalar_prefetch;
  if (nsp < 0 || nsp > static_cast<int>(args.size())) {
    return fail(fmt::format("num_scalar_prefetch={} for {} operands", nsp, args.size()));
  }
  const size_t num_inputs = args.size() - nsp;
  if (!spec_.in_specs.empty() && spec_.in_specs.size() != num_inputs) {
    return fail(fmt::format("{} in_specs for {} inputs (after {} scalar-prefetch operands)",
                            spec_.in_specs.size(), num_inputs, nsp));
  }
  if (!spec_.out_specs.empty() && spec_.out_specs.size() != num_outputs) {
    return fail(fmt::format("{} out_specs for {} out_shapes", spec_.out_specs.size(),
                            num_outputs));
  }
  const size_t num_refs = args.size() + num_outputs + spec_.scratch_shapes.size();
  if (kernel_.arity >= 0 && static_cast<size_t>(kernel_.arity) != num_refs) {
    return fail(fmt::format("the kernel takes {} refs, but the call gives {} ({} scalar-prefetch, "
                            "{} inputs, {} outputs, {} scratch)",
                            kernel_.arity, num_refs, nsp, num_inputs, num_outputs,
                            spec_.scratch_shapes.size()));
  }
  const int grid_rank = static_cast<int>(spec_.grid.size());
  ir::Op op;
  op.set_opcode("pallas_call");
  ir::PallasCallAttrs& a = *op.mutable_pallas_call();
  a.set_name(spec_.name);
  std::vector<Tracer> operands;  // the grid sizes known at run time, then `args`
  for (const GridDim& g : spec_.grid) {
    if (!g.traced.valid()) {
      if (g.size < 0) return fail(fmt::format("grid size {} is negative", g.size));
      a.add_grid(g.size);
      continue;
    }
    if (g.traced.rank() != 0 || !ir::IsInteger(g.traced.dtype())) {
      return fail(fmt::format("a grid size traced at run time must be an integer scalar, got {}",
                              g.traced.type().ToString()));
    }
    a.add_grid(-1);
    operands.push_back(g.traced.dtype() == DType::kS32
                           ? g.traced
                           : lax::convert_element_type(g.traced, DType::kS32, loc));
  }
  operands.insert(operands.end(), args.begin(), args.end());
  a.set_num_scalar_prefetch(nsp);
  for (GridSemantics s : spec_.dimension_semantics) {
    a.add_dimension_semantics(s == kParallel ? ir::PARALLEL : ir::ARBITRARY);
  }
  std::vector<ShapedType> prefetch_types;
  for (int i = 0; i < nsp; ++i) prefetch_types.push_back(args[i].type());
  // Traces the index map of `spec` for an array of type `array` into `out`.
  auto trace_spec = [&](const BlockSpec& spec, const ShapedType& array, ir::BlockSpec* out,
                        const std::string& name) {
    if (spec.unset()) {
      *out = WholeBlock(t, array, grid_rank, prefetch_types);
      return;
    }
    if (spec.whole()) {
      out->set_whole(true);
      return;
    }
    if (static_cast<int64_t>(spec.block_shape().size()) != array.rank()) {
      fail(fmt::format("{} has a block shape of rank {} ({}) for an array of rank {} ({})", name,
                       spec.block_shape().size(), absl::StrJoin(spec.block_shape(), ","),
                       array.rank(), array.ToString()));
      return;
    }
    for (int64_t b : spec.block_shape()) out->add_block_shape(b);
    ir::RegionScope scope(t->builder(), false, grid_rank);
    std::vector<Tracer> grid;
    for (int i = 0; i < grid_rank; ++i) grid.push_back(t->AddParam(kIndexType));
    std::vector<Ref> prefetch;
    for (const ShapedType& p : prefetch_types) prefetch.emplace_back(t->AddParam(p.AsRef()));
    std::vector<int64_t> ids;
    for (const Index& b : spec.index_map()(grid, prefetch)) {
      Tracer index = IndexTracer(t, b, loc);
      ids.push_back(index.valid() ? index.id() : -1);
    }
    *out->mutable_index_map() = scope.Close(ids);
  };
  for (size_t i = 0; i < num_inputs; ++i) {
    trace_spec(spec_.in_specs.empty() ? BlockSpec() : spec_.in_specs[i], args[nsp + i].type(),
               a.add_in_specs(), fmt::format("in_specs[{}]", i));
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    *a.add_out_shapes() = ir::ToProto(spec_.out_shapes[i]);
    trace_spec(spec_.out_specs.empty() ? BlockSpec() : spec_.out_specs[i], spec_.out_shapes[i],
               a.add_out_specs(), fmt::format("out_specs[{}]", i));
  }
  if (!t->status().ok()) return std::vector<Tracer>(num_outputs);
  if (!spec_.input_output_aliases.empty()) {
    a.mutable_input_output_aliases()->Resize(static_cast<int>(num_outputs), -1);
    for (const auto& [in, out] : spec_.input_output_aliases) {
      if (out < 0 || out >= static_cast<int>(num_outputs)) {
        return fail(fmt::format("input_output_aliases maps operand {} to output {}, but there "
                                "are {} outputs", in, out, num_outputs));
      }
      a.set_input_output_aliases(out, in);
    }
  }
  {
    // The kernel sees the mesh axes of the shard_map it runs in (axis_index).
    ir::RegionScope scope(t->builder(), t->builder().in_spmd(), grid_rank);
    std::vector<Ref> refs;
    for (const ShapedType& p : prefetch_types) refs.emplace_back(t->AddParam(p.AsRef()));
    for (size_t i = 0; i < num_inputs; ++i) {
      refs.emplace_back(t->AddParam(ir::BlockRefType(a.in_specs(i), args[nsp + i].type())));
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      refs.emplace_back(t->AddParam(ir::BlockRefType(a.out_specs(i), spec_.out_shapes[i])));
    }
    for (const ShapedType& s : spec_.scratch_shapes) refs.emplace_back(t->AddParam(s.AsRef()));
    // The barrier semaphore: one more scratch semaphore, after the user's.
    Ref barrier;
    if (spec_.barrier_semaphore) {
      barrier = Ref(t->AddParam(ShapedType::SemaphoreRef(ir::Semaphore::kRegular, {})));
    }
    const Ref* saved = std::exchange(current_barrier, barrier.valid() ? &barrier : nullptr);
    kernel_.fn(refs);
    current_barrier = saved;
    *a.mutable_kernel() = scope.Close({});
  }
  if (!t->status().ok()) return std::vector<Tracer>(num_outputs);
  return t->EmitN(std::move(op), operands, num_outputs, loc);
}

}  // namespace shardjit::pl
