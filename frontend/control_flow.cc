#include "frontend/control_flow.h"

#include <algorithm>

#include "fmt/format.h"
#include "frontend/collectives.h"
#include "frontend/trace_region.h"
#include "frontend/trace_state.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"

namespace shardjit {

namespace internal {

std::vector<Tracer> ShardMap(const TracedFunction& body, const Mesh& mesh,
                             const std::vector<PartitionSpec>& in_specs,
                             const std::vector<PartitionSpec>& out_specs,
                             const std::vector<Tracer>& args, bool check_vma) {
  const Loc loc = Loc::current();
  internal::TraceState* t = internal::TraceOf(args, "shard_map");
  if (t == nullptr) return std::vector<Tracer>(out_specs.size());
  auto fail = [&](absl::Status s) {
    t->RecordError(std::move(s), Loc());
    return std::vector<Tracer>(out_specs.size());
  };
  if (absl::Status s = t->UseMesh(mesh, "shard_map"); !s.ok()) return fail(s);
  if (args.size() != in_specs.size() ||
      (body.arity >= 0 && args.size() != static_cast<size_t>(body.arity))) {
    return fail(absl::InvalidArgumentError(fmt::format(
        "shard_map: called with {} arguments, but has {} in_specs and a body of {} parameters",
        args.size(), in_specs.size(), body.arity)));
  }
  for (const Tracer& a : args) {
    if (!a.valid()) return std::vector<Tracer>(out_specs.size());
  }
  if (t->builder().in_spmd()) {
    return fail(absl::InvalidArgumentError("shard_map: cannot be nested inside shard_map"));
  }
  std::vector<ShapedType> locals;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> local = ir::LocalDims(
        mesh.proto(), in_specs[i].proto(), args[i].shape(),
        fmt::format("shard_map in_specs[{}] for argument {}", i, args[i].type().ToString()));
    if (!local.ok()) return fail(local.status());
    locals.push_back({args[i].dtype(), *local});
  }
  // A parameter varies over the mesh axes its in_spec splits it over.
  auto mentioned = [](const PartitionSpec& spec) { return ir::MentionedAxes(spec.proto()); };
  t->builder().OpenRegion(/*spmd=*/true, -1, check_vma);
  std::vector<Tracer> params;
  for (size_t i = 0; i < locals.size(); ++i) {
    params.push_back(t->AddParam(locals[i], check_vma ? mentioned(in_specs[i]) : ir::AxisList()));
  }
  std::vector<Tracer> results = body.fn(params);
  // A result laid out over axes it does not vary over is a pvary of it (whose transpose sums the
  // cotangent the devices' copies get).
  for (size_t i = 0; check_vma && t->status().ok() && i < results.size(); ++i) {
    if (results[i].valid() && i < out_specs.size()) {
      results[i] = lax::pvary(results[i], mentioned(out_specs[i]));
    }
  }
  std::vector<int64_t> result_ids;
  for (const Tracer& r : results) result_ids.push_back(r.valid() ? r.id() : -1);
  // An out_spec claims replication over the axes it does not name: the result must not vary
  // over them (jax's check_vma).
  const bool counts_match = results.size() == out_specs.size();  // else the shape rule says so
  for (size_t i = 0; check_vma && counts_match && t->status().ok() && i < results.size(); ++i) {
    if (!results[i].valid()) continue;
    const ir::AxisList allowed = mentioned(out_specs[i]);
    for (const std::string& a : t->builder().VmaOf(results[i].id())) {
      if (std::find(allowed.begin(), allowed.end(), a) != allowed.end()) continue;
      t->builder().CloseRegion({});
      return fail(absl::InvalidArgumentError(fmt::format(
          "shard_map was given out_specs which require replication which can't be statically "
          "inferred given the mesh: out_specs[{}] is {}, which implies that the corresponding "
          "output value is replicated across mesh axis '{}', but it varies over ({}). Check "
          "if these output values are meant to be replicated over those mesh axes. If not, "
          "consider revising the corresponding out_specs entries. If so, consider disabling "
          "the check by passing check_vma=false to shard_map.",
          i, out_specs[i].to_string(), a, fmt::join(t->builder().VmaOf(results[i].id()), ", "))));
    }
  }
  ir::Op op;
  op.set_opcode("shard_map");
  if (check_vma) op.mutable_shard_map()->set_check_vma(true);
  *op.mutable_shard_map()->mutable_body() = t->builder().CloseRegion(result_ids);
  if (!t->status().ok()) return std::vector<Tracer>(out_specs.size());
  for (const Tracer& r : results) {
    if (!r.valid()) {
      return fail(absl::InvalidArgumentError("shard_map: the body returned an invalid tracer"));
    }
  }
  for (const PartitionSpec& s : in_specs) *op.mutable_shard_map()->add_in_specs() = s.proto();
  for (const PartitionSpec& s : out_specs) *op.mutable_shard_map()->add_out_specs() = s.proto();
  return t->Emit(std::move(op), args, loc);
}

}  // namespace internal

namespace lax {

namespace {

// Traces `fn` on params of `types` into `out`, a region that may read tracers of the enclosing
// function; false after an error.
bool TraceRegion(internal::TraceState* t, const std::vector<ShapedType>& types,
                 const std::function<std::vector<Tracer>(std::vector<Tracer>)>& fn,
                 ir::Region* out, const char* what, const std::vector<ir::AxisList>& vmas) {
  return internal::TraceRegion(
      t, TracedFunction{[&fn](const std::vector<Tracer>& p) { return fn(p); }, -1}, types, what,
      out, vmas);
}

// The trace of `tracers` (or the current one), or null when any is invalid.
internal::TraceState* ValidTrace(const std::vector<Tracer>& tracers, const char* op) {
  internal::TraceState* t = internal::TraceOf(tracers, op);
  if (t == nullptr) t = internal::CurrentTrace();
  for (const Tracer& x : tracers) {
    if (!x.valid()) return nullptr;
  }
  return t;
}

std::vector<Tracer> Fail(internal::TraceState* t, absl::Status status, size_t count, Loc loc) {
  t->RecordError(std::move(status), loc);
  return std::vector<Tracer>(count);
}

}  // namespace

std::vector<Tracer> fori_loop(
    int64_t lower, int64_t upper,
    const std::function<std::vector<Tracer>(Tracer, std::vector<Tracer>)>& body,
    std::vector<Tracer> init, Loc loc) {
  internal::TraceState* t = ValidTrace(init, "fori_loop");
  if (t == nullptr) return std::vector<Tracer>(init.size());
  std::vector<ShapedType> types = {{DType::kS32, {}}};  // the index, then the carry
  for (const Tracer& c : init) types.push_back(c.type());
  std::vector<ir::AxisList> vmas = {{}};
  for (const ir::AxisList& v : internal::VmasOf(t, init)) vmas.push_back(v);
  ir::Op op;
  op.set_opcode("fori_loop");
  op.mutable_fori_loop()->set_lower(lower);
  op.mutable_fori_loop()->set_upper(upper);
  const bool traced = TraceRegion(
      t, types,
      [&](std::vector<Tracer> p) {
        return body(p[0], std::vector<Tracer>(p.begin() + 1, p.end()));
      },
      op.mutable_fori_loop()->mutable_body(), "fori_loop", vmas);
  if (!traced) return std::vector<Tracer>(init.size());
  return t->Emit(std::move(op), init, loc);
}

Tracer fori_loop(int64_t lower, int64_t upper, const std::function<Tracer(Tracer, Tracer)>& body,
                 Tracer init, Loc loc) {
  std::vector<Tracer> out = fori_loop(
      lower, upper,
      [&](Tracer i, std::vector<Tracer> c) { return std::vector<Tracer>{body(i, c[0])}; },
      {std::move(init)}, loc);
  return out.empty() ? Tracer() : out[0];
}


std::vector<Tracer> while_loop(const std::function<Tracer(std::vector<Tracer>)>& cond_fun,
                               const std::function<std::vector<Tracer>(std::vector<Tracer>)>& body_fun,
                               std::vector<Tracer> init, Loc loc) {
  internal::TraceState* t = ValidTrace(init, "while_loop");
  if (t == nullptr) return std::vector<Tracer>(init.size());
  const std::vector<ShapedType> types = internal::TypesOf(init);
  const std::vector<ir::AxisList> vmas = internal::VmasOf(t, init);
  ir::Op op;
  op.set_opcode("while_loop");
  if (!TraceRegion(t, types, [&](std::vector<Tracer> c) { return std::vector<Tracer>{cond_fun(c)}; },
                   op.mutable_while_loop()->mutable_cond(), "while_loop", vmas) ||
      !TraceRegion(t, types, body_fun, op.mutable_while_loop()->mutable_body(), "while_loop",
                   vmas)) {
    return std::vector<Tracer>(init.size());
  }
  return t->EmitN(std::move(op), init, init.size(), loc);
}

Tracer while_loop(const std::function<Tracer(Tracer)>& cond_fun,
                  const std::function<Tracer(Tracer)>& body_fun, Tracer init, Loc loc) {
  return while_loop([&](std::vector<Tracer> c) { return cond_fun(c[0]); },
                    [&](std::vector<Tracer> c) { return std::vector<Tracer>{body_fun(c[0])}; },
                    {std::move(init)}, loc)[0];
}

std::vector<Tracer> switch_(Tracer index, const std::vector<Branch>& branches,
                            std::vector<Tracer> operands, Loc loc) {
  std::vector<Tracer> all = operands;
  all.push_back(index);
  internal::TraceState* t = ValidTrace(all, "cond");
  if (t == nullptr) return {};
  if (branches.empty()) {
    return Fail(t, absl::InvalidArgumentError("switch: needs at least one branch"), 0, loc);
  }
  ir::Op op;
  op.set_opcode("cond");
  const std::vector<ShapedType> types = internal::TypesOf(operands);
  const std::vector<ir::AxisList> vmas = internal::VmasOf(t, operands);
  for (const Branch& b : branches) {
    if (!TraceRegion(t, types, b, op.mutable_cond()->add_branches(), "cond", vmas)) return {};
  }
  // In a body typed with varying manual axes, every branch's result varies over what any
  // branch's (or the index) varies over: a pvary is appended to the results of the branches
  // that return less (each branch is traced once, as in JAX).
  if (t->builder().checks_vma()) {
    ir::FunctionBuilder& builder = t->builder();
    const int num_results = op.cond().branches(0).results_size();
    std::vector<ir::AxisList> want(num_results, builder.VmaOf(index.id()));
    for (const ir::Region& branch : op.cond().branches()) {
      for (int r = 0; r < branch.results_size() && r < num_results; ++r) {
        if (branch.results(r) < 0) continue;
        for (const std::string& a : builder.VmaOf(branch.results(r))) {
          if (std::find(want[r].begin(), want[r].end(), a) == want[r].end()) want[r].push_back(a);
        }
      }
    }
    for (ir::Region& branch : *op.mutable_cond()->mutable_branches()) {
      std::vector<int64_t> results(branch.results().begin(), branch.results().end());
      bool changed = false;
      for (int r = 0; r < static_cast<int>(results.size()) && r < num_results; ++r) {
        changed = changed ||
                  (results[r] >= 0 && builder.VmaOf(results[r]).size() != want[r].size());
      }
      if (!changed) continue;
      builder.ReopenRegion(std::move(branch));
      for (int r = 0; r < static_cast<int>(results.size()) && r < num_results; ++r) {
        if (results[r] < 0) continue;
        absl::StatusOr<int64_t> id = builder.VaryingOver(results[r], want[r]);
        if (!id.ok()) {
          builder.CloseRegion({});
          return Fail(t, id.status(), static_cast<size_t>(num_results), loc);
        }
        results[r] = *id;
      }
      branch = builder.CloseRegion(results);
    }
  }
  const size_t count = op.cond().branches(0).results_size();
  std::vector<Tracer> args = {index};
  args.insert(args.end(), operands.begin(), operands.end());
  return t->EmitN(std::move(op), args, count, loc);
}

std::vector<Tracer> cond(Tracer pred, const Branch& true_fun, const Branch& false_fun,
                         std::vector<Tracer> operands, Loc loc) {
  internal::TraceState* t = ValidTrace({pred}, "cond");
  if (t == nullptr) return {};
  if (pred.rank() != 0) {
    return Fail(t, absl::InvalidArgumentError(fmt::format(
                       "cond: pred must be a scalar, got {}", pred.type().ToString())),
                0, loc);
  }
  Tracer is_true =
      pred.dtype() == DType::kPred ? pred : lax::ne(pred, lax::scalar(0, pred.dtype(), loc), loc);
  return switch_(lax::convert_element_type(is_true, DType::kS32, loc), {false_fun, true_fun},
                 std::move(operands), loc);
}

Tracer cond(Tracer pred, const std::function<Tracer(Tracer)>& true_fun,
            const std::function<Tracer(Tracer)>& false_fun, Tracer operand, Loc loc) {
  std::vector<Tracer> out = cond(
      pred, [&](std::vector<Tracer> x) { return std::vector<Tracer>{true_fun(x[0])}; },
      [&](std::vector<Tracer> x) { return std::vector<Tracer>{false_fun(x[0])}; },
      {std::move(operand)}, loc);
  return out.empty() ? Tracer() : out[0];
}

ScanResult scan(const ScanBody& f, std::vector<Tracer> init, std::vector<Tracer> xs,
                int64_t length, bool reverse, Loc loc) {
  std::vector<Tracer> all = init;
  all.insert(all.end(), xs.begin(), xs.end());
  internal::TraceState* t = ValidTrace(all, "scan");
  ScanResult failed{std::vector<Tracer>(init.size()), {}};
  if (t == nullptr) return failed;
  for (const Tracer& x : xs) {
    const int64_t n = x.rank() == 0 ? -1 : x.shape()[0];
    if (n < 0 || (length >= 0 && n != length)) {
      Fail(t, absl::InvalidArgumentError(fmt::format(
                  "scan: every xs needs the leading dimension {} (length), got {}",
                  length >= 0 ? fmt::format("{}", length) : std::string("of the first"),
                  x.type().ToString())),
           0, loc);
      return failed;
    }
    length = n;
  }
  if (length < 0) {
    Fail(t, absl::InvalidArgumentError("scan: length is needed when there are no xs"), 0, loc);
    return failed;
  }
  const size_t num_carry = init.size();
  // The loop body: index, carry, then one stacked ys accumulator per y (typed once f is traced).
  t->builder().OpenRegion(/*spmd=*/false);
  Tracer i = t->AddParam({DType::kS32, {}});
  std::vector<Tracer> carry;
  for (const Tracer& c : init) carry.push_back(t->AddParam(c.type(), t->builder().VmaOf(c.id())));
  Tracer step = reverse ? lax::sub(lax::scalar(length - 1, DType::kS32, loc), i, loc) : i;
  std::vector<Tracer> x_i;
  for (const Tracer& x : xs) {
    std::vector<int64_t> item(x.shape().begin() + 1, x.shape().end());
    if (length == 0) {  // never runs: typed on zeros, then dropped
      x_i.push_back(lax::full(item, 0, x.dtype(), loc));
      continue;
    }
    std::vector<Index> starts = {step};
    std::vector<int64_t> sizes = x.shape();
    sizes[0] = 1;
    for (size_t d = 1; d < sizes.size(); ++d) starts.push_back(Index(0));
    x_i.push_back(lax::reshape(lax::dynamic_slice(x, starts, sizes, false, loc), item, loc));
  }
  auto [next, ys] = f(carry, x_i);
  std::vector<int64_t> ids;
  for (const Tracer& c : next) ids.push_back(c.valid() ? c.id() : -1);
  std::vector<ShapedType> stacked;
  std::vector<ir::AxisList> ys_vmas;  // each accumulator varies as its y
  for (const Tracer& y : ys) {
    if (!y.valid()) break;
    ShapedType type = y.type();
    type.dims.insert(type.dims.begin(), length);
    stacked.push_back(type);
    if (length == 0) continue;
    ys_vmas.push_back(t->builder().VmaOf(y.id()));
    Tracer acc = t->AddParam(type, ys_vmas.back());
    std::vector<int64_t> one = y.shape();
    one.insert(one.begin(), 1);
    std::vector<Index> starts = {step};
    for (size_t d = 0; d < y.shape().size(); ++d) starts.push_back(Index(0));
    ids.push_back(
        lax::dynamic_update_slice(acc, lax::reshape(y, one, loc), starts, false, loc).id());
  }
  ir::Op op;
  op.set_opcode("fori_loop");
  op.mutable_fori_loop()->set_lower(0);
  op.mutable_fori_loop()->set_upper(length);
  *op.mutable_fori_loop()->mutable_body() = t->builder().CloseRegion(ids);
  if (!t->status().ok()) return failed;
  if (next.size() != num_carry) {
    Fail(t, absl::InvalidArgumentError(fmt::format(
                "scan: f returns {} carries for {} in init", next.size(), num_carry)),
         0, loc);
    return failed;
  }
  for (size_t k = 0; k < num_carry; ++k) {
    if (next[k].type() != init[k].type()) {
      Fail(t, absl::InvalidArgumentError(fmt::format(
                  "scan: f returns carry {} as {}, but init has {}", k,
                  next[k].type().ToString(), init[k].type().ToString())),
           0, loc);
      return failed;
    }
  }
  if (length == 0) {  // the traced body is dropped: the carry as it came, empty ys
    ScanResult empty{init, {}};
    for (const ShapedType& type : stacked) empty.ys.push_back(lax::full(type.dims, 0, type.dtype, loc));
    return empty;
  }
  std::vector<Tracer> operands = init;
  for (size_t k = 0; k < stacked.size(); ++k) {
    Tracer zeros = lax::full(stacked[k].dims, 0, stacked[k].dtype, loc);
    if (!ys_vmas[k].empty()) zeros = lax::pvary(zeros, ys_vmas[k], loc);
    operands.push_back(zeros);
  }
  std::vector<Tracer> out = t->Emit(std::move(op), operands, loc);
  if (out.size() != num_carry + stacked.size()) return failed;
  return {std::vector<Tracer>(out.begin(), out.begin() + num_carry),
          std::vector<Tracer>(out.begin() + num_carry, out.end())};
}

}  // namespace lax
}  // namespace shardjit
