#include "frontend/control_flow.h"

#include "fmt/format.h"
#include "frontend/trace_state.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"

namespace shardjit {

namespace internal {

std::vector<Tracer> ShardMap(const TracedFunction& body, const Mesh& mesh,
                             const std::vector<PartitionSpec>& in_specs,
                             const std::vector<PartitionSpec>& out_specs,
                             const std::vector<Tracer>& args) {
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
  t->builder().OpenRegion(/*spmd=*/true);
  std::vector<Tracer> params;
  for (const ShapedType& type : locals) params.push_back(t->AddParam(type));
  std::vector<Tracer> results = body.fn(params);
  std::vector<int64_t> result_ids;
  for (const Tracer& r : results) result_ids.push_back(r.valid() ? r.id() : -1);
  ir::Op op;
  op.set_opcode("shard_map");
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

std::vector<Tracer> fori_loop(
    int64_t lower, int64_t upper,
    const std::function<std::vector<Tracer>(Tracer, std::vector<Tracer>)>& body,
    std::vector<Tracer> init, Loc loc) {
  internal::TraceState* t = internal::TraceOf(init, "fori_loop");
  if (t == nullptr) t = internal::CurrentTrace();
  if (t == nullptr) return std::vector<Tracer>(init.size());
  for (const Tracer& c : init) {
    if (!c.valid()) return std::vector<Tracer>(init.size());
  }
  t->builder().OpenRegion(/*spmd=*/false);
  Tracer index = t->AddParam({DType::kS32, {}});
  std::vector<Tracer> carry;
  for (const Tracer& c : init) carry.push_back(t->AddParam(c.type()));
  std::vector<Tracer> next = body(index, carry);
  std::vector<int64_t> ids;
  for (const Tracer& r : next) ids.push_back(r.valid() ? r.id() : -1);
  ir::Op op;
  op.set_opcode("fori_loop");
  op.mutable_fori_loop()->set_lower(lower);
  op.mutable_fori_loop()->set_upper(upper);
  *op.mutable_fori_loop()->mutable_body() = t->builder().CloseRegion(ids);
  if (!t->status().ok()) return std::vector<Tracer>(init.size());
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

}  // namespace lax
}  // namespace shardjit
