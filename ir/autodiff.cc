#include "ir/autodiff.h"

#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/autodiff_internal.h"
#include "ir/dtype.h"
#include "ir/primitive.h"
#include "ir/regions.h"

namespace shardjit::ir {

using autodiff_internal::Named;
using autodiff_internal::NoRule;

namespace autodiff_internal {

absl::StatusOr<std::vector<int64_t>> WalkJvp(
    FunctionBuilder& b, AdEmitter& e, const Region& region, const std::vector<int64_t>& primals,
    const std::vector<CapturedValue>& captures, bool linearizing,
    std::unordered_map<int64_t, int64_t>& tangent, std::vector<int64_t>* result_tangents,
    const std::unordered_map<int64_t, int64_t>* saved) {
  if (primals.size() != static_cast<size_t>(region.params_size())) {
    return absl::InvalidArgumentError(fmt::format(
        "autodiff: the region takes {} values, got {}", region.params_size(), primals.size()));
  }
  std::unordered_map<int64_t, int64_t> value;  // region id -> builder id
  for (int i = 0; i < region.params_size(); ++i) value[region.params(i).id()] = primals[i];
  for (const CapturedValue& c : captures) value[c.region_id] = c.value;
  auto mapped = [&](int64_t id) {
    auto it = value.find(id);
    return it == value.end() ? id : it->second;  // read from an enclosing region
  };
  auto tangent_of = [&](int64_t id) {
    auto it = tangent.find(id);
    return it == tangent.end() ? kZero : it->second;
  };
  for (const Op& op : region.ops()) {
    std::vector<int64_t> operands, tangents;
    bool any_tangent = false;
    for (int64_t id : op.operands()) {
      operands.push_back(mapped(id));
      tangents.push_back(tangent_of(id));
      any_tangent = any_tangent || tangents.back() != kZero;
    }
    // Loop bodies and branches read the walked region's values directly: they read the
    // re-emitted ones, and a tangent among them is one the op carries.
    Op copy = OpAttrs(op);
    bool reads_tangent = false;
    std::vector<CapturedValue> captures;  // the walked region's values the regions read
    std::unordered_map<int64_t, bool> seen;
    ForEachRegionRead(copy, [&](int64_t& id) {
      const bool known = value.count(id) > 0 || tangent.count(id) > 0;
      if (known && !seen[id]) {
        seen[id] = true;
        captures.push_back({id, mapped(id), tangent_of(id), tangent_of(id) != kZero});
      }
      reads_tangent = reads_tangent || tangent_of(id) != kZero;
      id = mapped(id);
    });
    // Ops with regions, differentiated through them.
    if (any_tangent || reads_tangent) {
      std::vector<int64_t> results, out;
      absl::Status status = absl::OkStatus();
      bool through_regions = true;
      switch (PrimOf(op)) {
        case Prim::kShardMap:  // closed: reads no outside value
          status = linearizing ? ShardMapLinearize(b, e, op, operands, tangents, &results, &out)
                               : ShardMapJvp(b, op, operands, tangents, &results, &out);
          break;
        case Prim::kCond:
          status = linearizing
                       ? CondLinearize(b, e, op, operands, tangents, captures, &results, &out)
                       : CondJvp(b, op, operands, tangents, captures, &results, &out);
          break;
        case Prim::kForiLoop:
          status = linearizing ? ForiLoopLinearize(b, e, op, operands, tangents, captures,
                                                   &results, &out)
                               : ForiLoopJvp(b, op, operands, tangents, captures, &results, &out);
          break;
        case Prim::kCustomJvpCall:
          status = CustomJvpCallJvp(b, e, op, operands, tangents, captures, linearizing,
                                    &results, &out);
          break;
        case Prim::kCustomVjpCall:
          status = linearizing ? CustomVjpCallLinearize(b, e, op, operands, tangents, captures,
                                                        &results, &out)
                               : absl::InvalidArgumentError(
                                     "can't apply forward-mode autodiff (jvp) to a custom_vjp "
                                     "function.");
          break;
        case Prim::kCheckpoint:  // remat in reverse mode; the body itself otherwise
          status = linearizing && !SavesEverything(op.checkpoint())
                       ? CheckpointLinearize(b, e, op, operands, tangents, captures, &results,
                                             &out)
                       : CheckpointInline(b, e, op, operands, tangents, captures, linearizing,
                                          &results, &out);
          break;
        case Prim::kWhileLoop:  // forward mode only, as in JAX
          status = linearizing
                       ? absl::InvalidArgumentError(
                             "Reverse-mode differentiation does not work for lax.while_loop or "
                             "lax.fori_loop with dynamic start/stop values.")
                       : WhileLoopJvp(b, op, operands, tangents, captures, &results, &out);
          break;
        default:
          through_regions = false;
      }
      if (through_regions) {
        RETURN_IF_ERROR(status);
        for (int i = 0; i < op.results_size(); ++i) {
          value[op.results(i)] = results[i];
          if (out[i] != kZero) tangent[op.results(i)] = out[i];
        }
        continue;
      }
    }
    if (reads_tangent && !any_tangent) {
      bool float_result = false;
      for (const TensorType& t : op.result_types()) {
        float_result = float_result || IsFloating(FromProto(t).dtype);
      }
      if (float_result) return NoRule("Differentiation", op);
    }
    std::vector<int64_t> results;
    if (saved != nullptr && op.results_size() > 0 && saved->count(op.results(0)) > 0) {
      for (int64_t r : op.results()) results.push_back(saved->at(r));
    } else {
      ASSIGN_OR_RETURN(results, b.AddOp(std::move(copy), operands));
    }
    for (int i = 0; i < op.results_size(); ++i) value[op.results(i)] = results[i];
    if (!any_tangent) continue;
    bool float_result = false;
    for (int64_t r : results) float_result = float_result || IsFloating(b.TypeOf(r).dtype);
    if (!float_result) continue;  // integer and pred results have no tangent
    const Primitive* prim = FindPrimitive(op.opcode());
    if (prim == nullptr || !prim->ad.jvp) return NoRule("Differentiation", op);
    std::vector<int64_t> recomputed;
    ASSIGN_OR_RETURN(std::vector<int64_t> out,
                     prim->ad.jvp(e, JvpArgs{op, operands, tangents, results, &recomputed}));
    if (out.size() != results.size() ||
        (!recomputed.empty() && recomputed.size() != results.size())) {
      return absl::InternalError(
          fmt::format("{}: its JVP rule gave {} tangents and {} results for {} results",
                      op.opcode(), out.size(), recomputed.size(), results.size()));
    }
    if (!recomputed.empty()) {
      results = recomputed;
      for (int i = 0; i < op.results_size(); ++i) value[op.results(i)] = results[i];
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != kZero && IsFloating(b.TypeOf(results[i]).dtype) &&
          (!linearizing || e.IsTangent(out[i]))) {
        tangent[op.results(i)] = out[i];
      }
    }
  }
  std::vector<int64_t> results;
  result_tangents->clear();
  for (int64_t id : region.results()) {
    results.push_back(mapped(id));
    result_tangents->push_back(tangent_of(id));
  }
  return results;
}

}  // namespace autodiff_internal

using autodiff_internal::WalkJvp;

Op OpAttrs(const Op& op) {
  Op copy = op;
  copy.clear_operands();
  copy.clear_results();
  copy.clear_result_types();
  return copy;
}

void ForEachRegionRead(Op& op, const std::function<void(int64_t&)>& f) {
  for (Region* r : MutableRegions(op)) {
    for (Op& inner : *r->mutable_ops()) {
      for (int64_t& id : *inner.mutable_operands()) f(id);
      ForEachRegionRead(inner, f);
    }
    for (int64_t& id : *r->mutable_results()) f(id);
  }
}

AdEmitter::AdEmitter(FunctionBuilder& b) : b_(b) {}
AdEmitter::AdEmitter(FunctionBuilder& b, LinearTape* tape) : b_(b), tape_(tape) {}

bool AdEmitter::IsTangent(int64_t id) const { return id >= kTangentBase; }

ShapedType AdEmitter::TypeOf(int64_t id) const {
  if (IsTangent(id)) return tape_->types.at(id);
  return b_.TypeOf(id);
}

absl::StatusOr<std::vector<int64_t>> AdEmitter::Emit(Op op,
                                                     const std::vector<int64_t>& operands) {
  bool on_tape = false;
  for (int64_t id : operands) {
    if (id == kZero) {
      return absl::InternalError(fmt::format("{}: a rule passed a zero tangent", op.opcode()));
    }
    on_tape = on_tape || IsTangent(id);
  }
  if (!on_tape) return b_.AddOp(std::move(op), operands);
  std::vector<ShapedType> types;
  for (int64_t id : operands) types.push_back(TypeOf(id));
  ShapeContext ctx{b_.mesh(), b_.in_spmd(),
                   [this](int64_t id) -> absl::StatusOr<ShapedType> { return TypeOf(id); },
                   b_.kernel_grid_rank(), b_.named_axes()};
  ASSIGN_OR_RETURN(std::vector<ShapedType> result_types, InferResultTypes(ctx, types, op));
  LinearTape::Entry entry{OpAttrs(op), operands, {}};
  for (const ShapedType& t : result_types) entry.results.push_back(tape_->NewValue(t));
  std::vector<int64_t> results = entry.results;
  tape_->ops.push_back(std::move(entry));
  return results;
}

absl::StatusOr<int64_t> AdEmitter::Emit1(Op op, const std::vector<int64_t>& operands) {
  ASSIGN_OR_RETURN(std::vector<int64_t> r, Emit(std::move(op), operands));
  return r.at(0);
}

absl::StatusOr<int64_t> AdEmitter::Unary(std::string_view opcode, int64_t x) {
  return Emit1(Named(opcode), {x});
}

absl::StatusOr<int64_t> AdEmitter::Binary(std::string_view opcode, int64_t a, int64_t b) {
  return Emit1(Named(opcode), {a, b});
}

absl::StatusOr<int64_t> AdEmitter::Full(double value, const ShapedType& type) {
  Op op = Named("constant");
  op.mutable_constant()->set_dtype(ToProto(type.dtype));
  for (int64_t d : type.dims) op.mutable_constant()->add_shape(d);
  op.mutable_constant()->add_value(value);
  return Emit1(std::move(op), {});
}

absl::StatusOr<int64_t> AdEmitter::FullLike(double value, int64_t x) {
  return Full(value, TypeOf(x));
}

absl::StatusOr<int64_t> AdEmitter::Compare(int64_t a, int64_t b, ComparisonDirection direction) {
  Op op = Named("compare");
  op.mutable_compare()->set_direction(direction);
  return Emit1(std::move(op), {a, b});
}

absl::StatusOr<int64_t> AdEmitter::Select(int64_t pred, int64_t on_true, int64_t on_false) {
  return Emit1(Named("select"), {pred, on_true, on_false});
}

absl::StatusOr<int64_t> AdEmitter::Convert(int64_t x, DType dtype) {
  if (TypeOf(x).dtype == dtype) return x;
  Op op = Named("convert_element_type");
  op.mutable_convert_element_type()->set_new_dtype(ToProto(dtype));
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::BroadcastInDim(int64_t x, const std::vector<int64_t>& shape,
                                                  const std::vector<int64_t>& dims) {
  Op op = Named("broadcast_in_dim");
  op.mutable_broadcast_in_dim();  // set even when both lists are empty
  for (int64_t d : shape) op.mutable_broadcast_in_dim()->add_shape(d);
  for (int64_t d : dims) op.mutable_broadcast_in_dim()->add_broadcast_dimensions(d);
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::Reshape(int64_t x, const std::vector<int64_t>& shape) {
  if (TypeOf(x).dims == shape) return x;
  Op op = Named("reshape");
  op.mutable_reshape();  // set even for a scalar result
  for (int64_t d : shape) op.mutable_reshape()->add_new_sizes(d);
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::Transpose(int64_t x, const std::vector<int64_t>& permutation) {
  bool identity = true;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity = identity && permutation[i] == static_cast<int64_t>(i);
  }
  if (identity) return x;
  Op op = Named("transpose");
  op.mutable_transpose();  // set even for a scalar
  for (int64_t d : permutation) op.mutable_transpose()->add_permutation(d);
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::ReduceSum(int64_t x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return x;
  Op op = Named("reduce_sum");
  for (int64_t a : axes) op.mutable_reduce()->add_axes(a);
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::AddAny(int64_t a, int64_t b) {
  if (a == kZero) return b;
  if (b == kZero) return a;
  return Binary("add", a, b);
}

absl::StatusOr<int64_t> AdEmitter::Instantiate(int64_t x, const ShapedType& type) {
  if (x != kZero) return x;
  return Full(0, type);
}

absl::StatusOr<int64_t> AdEmitter::Scale(int64_t x, int64_t factor) {
  if (x == kZero) return kZero;
  return Binary("mul", x, factor);
}

absl::StatusOr<std::vector<int64_t>> AdEmitter::RecordLinear(
    const std::vector<int64_t>& operands, const std::vector<ShapedType>& result_types,
    const std::vector<int64_t>& reads, CustomTranspose transpose) {
  if (tape_ == nullptr) return absl::InternalError("RecordLinear outside a linearization");
  LinearTape::Entry entry;
  entry.operands = operands;
  entry.reads = reads;
  for (const ShapedType& t : result_types) entry.results.push_back(tape_->NewValue(t));
  entry.custom = std::move(transpose);
  std::vector<int64_t> results = entry.results;
  tape_->ops.push_back(std::move(entry));
  return results;
}

absl::StatusOr<JvpResult> EmitJvp(FunctionBuilder& b, const Region& region,
                                  const std::vector<int64_t>& primals,
                                  const std::vector<int64_t>& tangents,
                                  const std::vector<CapturedValue>& captures) {
  if (tangents.size() != primals.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "jvp: {} primals but {} tangents", primals.size(), tangents.size()));
  }
  std::unordered_map<int64_t, int64_t> tangent;
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (tangents[i] != kZero) tangent[region.params(i).id()] = tangents[i];
  }
  for (const CapturedValue& c : captures) {
    if (c.tangent != kZero) tangent[c.region_id] = c.tangent;
  }
  AdEmitter e(b);
  JvpResult out;
  ASSIGN_OR_RETURN(out.results, WalkJvp(b, e, region, primals, captures, /*linearizing=*/false,
                                        tangent, &out.tangents));
  return out;
}

Linearized::Linearized() : tape_(std::make_unique<LinearTape>()) {}
Linearized::Linearized(Linearized&&) = default;
Linearized& Linearized::operator=(Linearized&&) = default;
Linearized::~Linearized() = default;

absl::StatusOr<Linearized> Linearized::Linearize(
    FunctionBuilder& b, const Region& region, const std::vector<int64_t>& primals,
    const std::vector<bool>& wrt, const std::vector<CapturedValue>& captures,
    const std::unordered_map<int64_t, int64_t>& saved) {
  if (wrt.size() != primals.size()) {
    return absl::InvalidArgumentError("linearize: one wrt flag per primal");
  }
  Linearized lin;
  std::unordered_map<int64_t, int64_t> tangent;
  for (size_t i = 0; i < primals.size(); ++i) {
    const ShapedType type = b.TypeOf(primals[i]);
    lin.input_types_.push_back(type);
    if (!wrt[i]) {
      lin.input_tangents_.push_back(kZero);
      continue;
    }
    if (!IsFloating(type.dtype)) {
      return absl::InvalidArgumentError(fmt::format(
          "grad requires real-valued inputs (input dtype that is a sub-dtype of np.inexact), but "
          "got {} for input {}", DTypeName(type.dtype), i));
    }
    const int64_t t = lin.tape_->NewValue(type);
    lin.input_tangents_.push_back(t);
    tangent[region.params(static_cast<int>(i)).id()] = t;
  }
  for (const CapturedValue& c : captures) {
    const ShapedType type = b.TypeOf(c.value);
    lin.input_types_.push_back(type);
    if (!c.wrt) {
      lin.input_tangents_.push_back(kZero);
      continue;
    }
    const int64_t t = lin.tape_->NewValue(type);
    lin.input_tangents_.push_back(t);
    tangent[c.region_id] = t;
  }
  AdEmitter e(b, lin.tape_.get());
  ASSIGN_OR_RETURN(lin.results_, WalkJvp(b, e, region, primals, captures, /*linearizing=*/true,
                                         tangent, &lin.result_tangents_, &saved));
  return lin;
}

std::vector<int64_t> Linearized::Residuals() const {
  std::vector<int64_t> out;
  std::unordered_map<int64_t, bool> seen;
  for (const LinearTape::Entry& entry : tape_->ops) {
    for (const std::vector<int64_t>* ids : {&entry.operands, &entry.reads}) {
      for (int64_t id : *ids) {
        if (id >= kTangentBase || seen[id]) continue;
        seen[id] = true;
        out.push_back(id);
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> Linearized::Transpose(
    FunctionBuilder& b, const std::vector<int64_t>& cotangents) const {
  return Transpose(b, cotangents, {});
}

absl::StatusOr<std::vector<int64_t>> Linearized::Transpose(
    FunctionBuilder& b, const std::vector<int64_t>& cotangents,
    const std::unordered_map<int64_t, int64_t>& remap) const {
  if (cotangents.size() != results_.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "vjp: {} cotangents for {} results", cotangents.size(), results_.size()));
  }
  AdEmitter e(b);
  std::unordered_map<int64_t, int64_t> ct;  // tape value -> its cotangent (builder id)
  auto accumulate = [&](int64_t value, int64_t c) -> absl::Status {
    if (c == kZero) return absl::OkStatus();
    auto it = ct.find(value);
    if (it == ct.end()) {
      ct[value] = c;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(it->second, e.AddAny(it->second, c));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < cotangents.size(); ++i) {
    if (result_tangents_[i] != kZero && cotangents[i] != kZero) {
      const ShapedType want = tape_->types.at(result_tangents_[i]);
      if (b.TypeOf(cotangents[i]) != want) {
        return absl::InvalidArgumentError(
            fmt::format("vjp: cotangent {} is {}, but the result is {}", i,
                        b.TypeOf(cotangents[i]).ToString(), want.ToString()));
      }
      RETURN_IF_ERROR(accumulate(result_tangents_[i], cotangents[i]));
    }
  }
  for (auto it = tape_->ops.rbegin(); it != tape_->ops.rend(); ++it) {
    std::vector<int64_t> result_cts;
    bool any = false;
    for (int64_t r : it->results) {
      auto found = ct.find(r);
      result_cts.push_back(found == ct.end() ? kZero : found->second);
      any = any || result_cts.back() != kZero;
    }
    if (!any) continue;
    if (it->custom) {
      auto primal = [&remap](int64_t id) {
        auto found = remap.find(id);
        return found == remap.end() ? id : found->second;
      };
      ASSIGN_OR_RETURN(std::vector<int64_t> operand_cts, it->custom(b, result_cts, primal));
      for (size_t j = 0; j < it->operands.size() && j < operand_cts.size(); ++j) {
        RETURN_IF_ERROR(accumulate(it->operands[j], operand_cts[j]));
      }
      continue;
    }
    const Primitive* prim = FindPrimitive(it->op.opcode());
    if (prim == nullptr || !prim->ad.transpose) return NoRule("Transpose", it->op);
    std::vector<int64_t> operands;
    std::vector<bool> linear;
    std::vector<ShapedType> types;
    for (int64_t id : it->operands) {
      const bool is_tangent = id >= kTangentBase;
      linear.push_back(is_tangent);
      auto remapped = remap.find(id);
      const int64_t primal = remapped == remap.end() ? id : remapped->second;
      operands.push_back(is_tangent ? kZero : primal);
      types.push_back(is_tangent ? tape_->types.at(id) : b.TypeOf(primal));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> operand_cts,
                     prim->ad.transpose(e, TransposeArgs{it->op, operands, linear, types,
                                                         result_cts}));
    for (size_t j = 0; j < it->operands.size() && j < operand_cts.size(); ++j) {
      if (!linear[j] || operand_cts[j] == kZero) continue;
      if (b.TypeOf(operand_cts[j]) != types[j]) {
        return absl::InternalError(fmt::format(
            "{}: its transpose rule gave a {} cotangent for a {} operand", it->op.opcode(),
            b.TypeOf(operand_cts[j]).ToString(), types[j].ToString()));
      }
      RETURN_IF_ERROR(accumulate(it->operands[j], operand_cts[j]));
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < input_tangents_.size(); ++i) {
    if (input_tangents_[i] == kZero) {
      out.push_back(kZero);
      continue;
    }
    auto found = ct.find(input_tangents_[i]);
    ASSIGN_OR_RETURN(int64_t c, e.Instantiate(found == ct.end() ? kZero : found->second,
                                              input_types_[i]));
    out.push_back(c);
  }
  return out;
}

namespace {

std::vector<int64_t> AddParams(FunctionBuilder& b, const Region& region) {
  std::vector<int64_t> ids;
  for (const Param& p : region.params()) ids.push_back(b.AddParam(FromProto(p.type())));
  return ids;
}

}  // namespace

absl::StatusOr<Function> JvpFunction(const Function& f, const Mesh* mesh, bool per_device) {
  FunctionBuilder b(mesh, per_device);
  const std::vector<int64_t> primals = AddParams(b, f.body());
  std::vector<int64_t> tangents;
  for (int64_t p : primals) {
    const int64_t t = b.AddParam(b.TypeOf(p));
    tangents.push_back(IsFloating(b.TypeOf(p).dtype) ? t : kZero);
  }
  ASSIGN_OR_RETURN(JvpResult jvp, EmitJvp(b, f.body(), primals, tangents));
  std::vector<int64_t> results = jvp.results;
  AdEmitter e(b);
  for (size_t i = 0; i < jvp.tangents.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t t, e.Instantiate(jvp.tangents[i], b.TypeOf(jvp.results[i])));
    results.push_back(t);
  }
  return b.Finish(f.name() + "_jvp", results);
}

std::optional<AdTransform> ParseAdTransform(std::string_view name) {
  if (name == "jvp") return AdTransform::kJvp;
  if (name == "vjp") return AdTransform::kVjp;
  return std::nullopt;
}

absl::StatusOr<Module> TransformModule(const Module& m, AdTransform transform) {
  if (m.position_functions_size() > 0) {
    return absl::InvalidArgumentError("autodiff: MPMD modules (position functions) cannot be "
                                      "transformed");
  }
  Module out = m;
  Function* entry = nullptr;
  for (Function& f : *out.mutable_functions()) {
    if (f.name() == m.entry()) entry = &f;
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(fmt::format("autodiff: no entry function '{}'", m.entry()));
  }
  const bool per_device = m.view() == PER_DEVICE;
  const Mesh* mesh = m.has_mesh() ? &m.mesh() : nullptr;
  ASSIGN_OR_RETURN(Function transformed, transform == AdTransform::kJvp
                                             ? JvpFunction(*entry, mesh, per_device)
                                             : VjpFunction(*entry, mesh, per_device));
  transformed.set_name(entry->name());
  const int num_params = entry->body().params_size();
  const int num_results = entry->body().results_size();
  *entry = std::move(transformed);
  // JVP: (primals, tangents) -> (results, tangents); VJP: (primals, result cotangents) ->
  // (results, input cotangents).
  // An empty list means every value replicated: spelled out, as the lists now differ in length.
  auto filled = [](const google::protobuf::RepeatedPtrField<PartitionSpec>& specs, int count) {
    google::protobuf::RepeatedPtrField<PartitionSpec> out = specs;
    if (out.empty()) {
      for (int i = 0; i < count; ++i) out.Add();
    }
    return out;
  };
  const auto params = filled(m.param_shardings(), num_params);
  const auto results = filled(m.result_shardings(), num_results);
  *out.mutable_param_shardings() = params;
  *out.mutable_result_shardings() = results;
  if (transform == AdTransform::kJvp) {
    out.mutable_param_shardings()->MergeFrom(params);
    out.mutable_result_shardings()->MergeFrom(results);
  } else {
    out.mutable_param_shardings()->MergeFrom(results);
    out.mutable_result_shardings()->MergeFrom(params);
  }
  return out;
}

absl::StatusOr<Function> VjpFunction(const Function& f, const Mesh* mesh, bool per_device) {
  FunctionBuilder b(mesh, per_device);
  const std::vector<int64_t> primals = AddParams(b, f.body());
  std::vector<bool> wrt;
  for (int64_t p : primals) wrt.push_back(IsFloating(b.TypeOf(p).dtype));
  ASSIGN_OR_RETURN(Linearized lin, Linearized::Linearize(b, f.body(), primals, wrt));
  std::vector<int64_t> cotangents;
  for (int64_t r : lin.results()) cotangents.push_back(b.AddParam(b.TypeOf(r)));
  ASSIGN_OR_RETURN(std::vector<int64_t> input_cts, lin.Transpose(b, cotangents));
  std::vector<int64_t> results = lin.results();
  AdEmitter e(b);
  for (size_t i = 0; i < input_cts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t c, e.Instantiate(input_cts[i], b.TypeOf(primals[i])));
    results.push_back(c);
  }
  return b.Finish(f.name() + "_vjp", results);
}

}  // namespace shardjit::ir
