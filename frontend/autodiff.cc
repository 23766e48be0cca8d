#include "frontend/autodiff.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "frontend/trace_region.h"
#include "frontend/trace_state.h"
#include "ir/autodiff.h"
#include "ir/batching.h"
#include "ir/dtype.h"

namespace shardjit::internal {

JvpOut Jvp(const TracedFunction& f, const std::vector<Tracer>& primals,
           const std::vector<Tracer>& tangents, Loc loc) {
  std::vector<Tracer> all = primals;
  all.insert(all.end(), tangents.begin(), tangents.end());
  TraceState* t = TraceOfArgs(all, "jvp");
  if (t == nullptr) return {};
  if (primals.size() != tangents.size()) {
    Check(t, absl::InvalidArgumentError(fmt::format(
                 "jvp: {} primals but {} tangents", primals.size(), tangents.size())), loc);
    return {};
  }
  std::vector<int64_t> tangent_ids;
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].type() != tangents[i].type()) {
      Check(t, absl::InvalidArgumentError(fmt::format(
                   "jvp: primal and tangent arguments do not match: primal {} is {} but its "
                   "tangent is {}", i, primals[i].type().ToString(),
                   tangents[i].type().ToString())), loc);
      return {};
    }
    tangent_ids.push_back(ir::IsFloating(primals[i].dtype()) ? tangents[i].id() : ir::kZero);
  }
  ir::Region region;
  if (!TraceRegion(t, f, TypesOf(primals), "jvp", &region, VmasOf(t, primals))) return {};
  absl::StatusOr<ir::JvpResult> out =
      ir::EmitJvp(t->builder(), region, Ids(primals), tangent_ids);
  if (!Check(t, out.status(), loc)) return {};
  ir::AdEmitter e(t->builder());
  JvpOut result{Wrap(t, out->results), {}};
  for (size_t i = 0; i < out->tangents.size(); ++i) {
    absl::StatusOr<int64_t> tangent =
        e.Instantiate(out->tangents[i], t->builder().TypeOf(out->results[i]));
    if (!Check(t, tangent.status(), loc)) return {};
    result.tangents_out.push_back(t->Wrap(*tangent));
  }
  return result;
}

LinearizeOut Linearize(const TracedFunction& f, const std::vector<Tracer>& primals, Loc loc) {
  TraceState* t = TraceOfArgs(primals, "linearize");
  if (t == nullptr) return {};
  auto region = std::make_shared<ir::Region>();
  if (!TraceRegion(t, f, TypesOf(primals), "linearize", region.get(),
                   VmasOf(t, primals))) {
    return {};
  }
  const std::vector<int64_t> primal_ids = Ids(primals);
  absl::StatusOr<ir::JvpResult> out = ir::EmitJvp(
      t->builder(), *region, primal_ids, std::vector<int64_t>(primals.size(), ir::kZero));
  if (!Check(t, out.status(), loc)) return {};
  const std::vector<ShapedType> types = TypesOf(primals);
  LinearizeOut result{Wrap(t, out->results), {}};
  result.jvp = [t, region, primal_ids, types, loc](const std::vector<Tracer>& tangents) {
    const std::vector<Tracer> none(types.size());
    if (tangents.size() != types.size()) {
      Check(t, absl::InvalidArgumentError(fmt::format(
                   "linearize: the JVP takes {} tangents, got {}", types.size(),
                   tangents.size())), loc);
      return none;
    }
    std::vector<int64_t> ids;
    for (size_t i = 0; i < tangents.size(); ++i) {
      if (!tangents[i].valid() || tangents[i].state() != t || tangents[i].type() != types[i]) {
        Check(t, absl::InvalidArgumentError(fmt::format(
                     "linearize: tangent {} must be a {} value of this trace", i,
                     types[i].ToString())), loc);
        return none;
      }
      ids.push_back(ir::IsFloating(types[i].dtype) ? tangents[i].id() : ir::kZero);
    }
    absl::StatusOr<ir::JvpResult> jvp = ir::EmitJvp(t->builder(), *region, primal_ids, ids);
    if (!Check(t, jvp.status(), loc)) return none;
    ir::AdEmitter e(t->builder());
    std::vector<Tracer> out;
    for (size_t i = 0; i < jvp->tangents.size(); ++i) {
      absl::StatusOr<int64_t> tangent =
          e.Instantiate(jvp->tangents[i], t->builder().TypeOf(jvp->results[i]));
      if (!Check(t, tangent.status(), loc)) return none;
      out.push_back(t->Wrap(*tangent));
    }
    return out;
  };
  return result;
}

VjpOut Vjp(const TracedFunction& f, const std::vector<Tracer>& primals, Loc loc) {
  TraceState* t = TraceOfArgs(primals, "vjp");
  if (t == nullptr) return {};
  ir::Region region;
  if (!TraceRegion(t, f, TypesOf(primals), "vjp", &region, VmasOf(t, primals))) return {};
  std::vector<bool> wrt;
  for (const Tracer& p : primals) wrt.push_back(ir::IsFloating(p.dtype()));
  absl::StatusOr<ir::Linearized> lin =
      ir::Linearized::Linearize(t->builder(), region, Ids(primals), wrt);
  if (!Check(t, lin.status(), loc)) return {};
  auto shared = std::make_shared<ir::Linearized>(*std::move(lin));
  std::vector<ShapedType> input_types;
  for (const Tracer& p : primals) input_types.push_back(p.type());
  VjpOut out{Wrap(t, shared->results()), {}};
  out.pullback = [t, shared, input_types, loc](const std::vector<Tracer>& cotangents) {
    for (const Tracer& c : cotangents) {
      if (!c.valid() || c.state() != t) {
        Check(t, absl::InvalidArgumentError("vjp: a cotangent is not a value of this trace"),
              loc);
        return std::vector<Tracer>(input_types.size());
      }
    }
    absl::StatusOr<std::vector<int64_t>> cts = shared->Transpose(t->builder(), Ids(cotangents));
    if (!Check(t, cts.status(), loc)) return std::vector<Tracer>(input_types.size());
    ir::AdEmitter e(t->builder());
    std::vector<Tracer> grads;
    for (size_t i = 0; i < cts->size(); ++i) {
      absl::StatusOr<int64_t> g = e.Instantiate((*cts)[i], input_types[i]);
      if (!Check(t, g.status(), loc)) return std::vector<Tracer>(input_types.size());
      grads.push_back(t->Wrap(*g));
    }
    return grads;
  };
  return out;
}

std::vector<Tracer> ValueAndGrad(const TracedFunction& f, const std::vector<Tracer>& args,
                                 const std::vector<int>& argnums, bool has_aux, bool with_value,
                                 Loc loc) {
  const char* what = with_value ? "value_and_grad" : "grad";
  TraceState* t = TraceOfArgs(args, what);
  if (t == nullptr) return {};
  std::vector<bool> wrt(args.size(), false);
  for (int a : argnums) {
    if (a < 0 || static_cast<size_t>(a) >= args.size()) {
      Check(t, absl::InvalidArgumentError(fmt::format(
                   "{}: argnums {} is out of range for a function of {} arguments", what, a,
                   args.size())), loc);
      return {};
    }
    wrt[a] = true;
  }
  ir::Region region;
  if (!TraceRegion(t, f, TypesOf(args), what, &region, VmasOf(t, args))) return {};
  if (region.results_size() == 0 || (!has_aux && region.results_size() != 1)) {
    Check(t, absl::InvalidArgumentError(fmt::format(
                 "{}: the function must return one scalar{}, got {} results", what,
                 has_aux ? " (and its auxiliary outputs)" : "", region.results_size())), loc);
    return {};
  }
  absl::StatusOr<ir::Linearized> lin =
      ir::Linearized::Linearize(t->builder(), region, Ids(args), wrt);
  if (!Check(t, lin.status(), loc)) return {};
  const int64_t value = lin->results()[0];
  const ShapedType value_type = t->builder().TypeOf(value);
  if (value_type.rank() != 0) {
    Check(t, absl::InvalidArgumentError(fmt::format(
                 "Gradient only defined for scalar-output functions. Output had shape: {}",
                 value_type.ToString())), loc);
    return {};
  }
  if (!ir::IsFloating(value_type.dtype)) {
    Check(t, absl::InvalidArgumentError(fmt::format(
                 "grad requires real-valued outputs (output dtype that is a sub-dtype of "
                 "np.floating), but got {}", ir::DTypeName(value_type.dtype))), loc);
    return {};
  }
  ir::AdEmitter e(t->builder());
  absl::StatusOr<int64_t> one = e.Full(1.0, value_type);
  if (!Check(t, one.status(), loc)) return {};
  std::vector<int64_t> cotangents(lin->results().size(), ir::kZero);
  cotangents[0] = *one;
  absl::StatusOr<std::vector<int64_t>> cts = lin->Transpose(t->builder(), cotangents);
  if (!Check(t, cts.status(), loc)) return {};
  std::vector<Tracer> out;
  if (with_value) out.push_back(t->Wrap(value));
  for (int a : argnums) out.push_back(t->Wrap((*cts)[a]));
  for (size_t i = 1; i < lin->results().size(); ++i) out.push_back(t->Wrap(lin->results()[i]));
  return out;
}

std::vector<Tracer> Vmap(const TracedFunction& f, const std::vector<Tracer>& args,
                         const std::vector<std::optional<int64_t>>& in_axes,
                         const std::vector<int64_t>& out_axes, const std::string& axis_name,
                         Loc loc) {
  TraceState* t = TraceOfArgs(args, "vmap");
  if (t == nullptr) return {};
  auto fail = [&](std::string message) {
    Check(t, absl::InvalidArgumentError(std::move(message)), loc);
    return std::vector<Tracer>();
  };
  if (in_axes.size() != 1 && in_axes.size() != args.size()) {
    return fail(fmt::format("vmap in_axes must have one entry or one per argument ({}), got {}",
                            args.size(), in_axes.size()));
  }
  std::vector<int64_t> batch_dims;
  int64_t size = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::optional<int64_t> axis = in_axes.size() == 1 ? in_axes[0] : in_axes[i];
    if (!axis) {
      batch_dims.push_back(ir::kNotBatched);
      continue;
    }
    const int64_t rank = args[i].rank();
    const int64_t a = *axis < 0 ? *axis + rank : *axis;
    if (a < 0 || a >= rank) {
      return fail(fmt::format("vmap was requested to map its argument along axis {}, which "
                              "implies that its rank should be at least {}, but is only {} "
                              "(its shape is {})", *axis, *axis < 0 ? -*axis : *axis + 1, rank,
                              args[i].type().ToString()));
    }
    if (size >= 0 && args[i].shape()[a] != size) {
      return fail(fmt::format("vmap got inconsistent sizes for array axes to be mapped: "
                              "argument {} has size {} along axis {}, others {}", i,
                              args[i].shape()[a], a, size));
    }
    size = args[i].shape()[a];
    batch_dims.push_back(a);
  }
  if (size < 0) return fail("vmap must have at least one non-None value in in_axes");
  std::vector<ShapedType> example_types;  // one element's arguments, to trace f on
  for (size_t i = 0; i < args.size(); ++i) {
    example_types.push_back(args[i].type());
    std::vector<int64_t>& dims = example_types.back().dims;
    if (batch_dims[i] != ir::kNotBatched) dims.erase(dims.begin() + batch_dims[i]);
  }
  if (!axis_name.empty()) {
    const ir::Mesh* mesh = t->builder().mesh();
    for (int i = 0; mesh != nullptr && i < mesh->axes_size(); ++i) {
      if (mesh->axes(i).name() == axis_name) {
        return fail(fmt::format("vmap: axis_name '{}' is already an axis of the mesh",
                                axis_name));
      }
    }
  }
  // While f is traced, collectives may name the vmapped axis.
  ir::Region region;
  if (!axis_name.empty()) t->builder().PushNamedAxis(axis_name, size);
  const bool traced = TraceRegion(t, f, example_types, "vmap", &region, VmasOf(t, args));
  if (!axis_name.empty()) t->builder().PopNamedAxis();
  if (!traced) return {};
  if (out_axes.size() != 1 && out_axes.size() != static_cast<size_t>(region.results_size())) {
    return fail(fmt::format("vmap out_axes must have one entry or one per result ({}), got {}",
                            region.results_size(), out_axes.size()));
  }
  absl::StatusOr<ir::BatchedValues> batched =
      ir::EmitBatched(t->builder(), region, Ids(args), batch_dims, size, {}, axis_name);
  if (!Check(t, batched.status(), loc)) return {};
  ir::AdEmitter e(t->builder());
  std::vector<Tracer> out;
  for (size_t i = 0; i < batched->values.size(); ++i) {
    const int64_t v = batched->values[i];
    const int64_t rank = t->builder().TypeOf(v).rank() +
                         (batched->batch_dims[i] == ir::kNotBatched ? 1 : 0);
    int64_t axis = out_axes.size() == 1 ? out_axes[0] : out_axes[i];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) {
      return fail(fmt::format("vmap out_axes {} is out of range for a result of rank {}",
                              out_axes.size() == 1 ? out_axes[0] : out_axes[i], rank));
    }
    absl::StatusOr<int64_t> moved = ir::MoveBatchDim(e, v, batched->batch_dims[i], axis, size);
    if (!Check(t, moved.status(), loc)) return {};
    out.push_back(t->Wrap(*moved));
  }
  return out;
}

}  // namespace shardjit::internal
