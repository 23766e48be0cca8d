#include "ir/autodiff.h"

#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype.h"
#include "ir/primitive.h"

namespace shardjit::ir {

// Tangent values live on the tape with ids from kTangentBase on (builder ids stay far below).
inline constexpr int64_t kTangentBase = int64_t{1} << 48;

// The linear ops of a JVP, in order, on tangent values.
struct LinearTape {
  struct Entry {
    Op op;  // attributes only
    std::vector<int64_t> operands, results;
  };
  std::vector<Entry> ops;
  std::unordered_map<int64_t, ShapedType> types;
  int64_t next_id = kTangentBase;

  int64_t NewValue(const ShapedType& type) {
    types[next_id] = type;
    return next_id++;
  }
};

namespace {

bool IsFloat(DType d) { return IsFloating(d); }

// `op` with its attributes only (no operands or results).
Op AttrsOnly(const Op& op) {
  Op copy = op;
  copy.clear_operands();
  copy.clear_results();
  copy.clear_result_types();
  return copy;
}

Op Named(std::string_view opcode) {
  Op op;
  op.set_opcode(std::string(opcode));
  return op;
}

absl::Status NoRule(std::string_view kind, const Op& op) {
  return absl::UnimplementedError(
      fmt::format("{} rule for '{}' not implemented", kind, op.opcode()));
}

// Walks `region` once: each op is re-emitted on mapped operands and its tangents computed with
// the JVP rules through `e`. `tangent` maps region values to tangents (absent: zero).
// While linearizing (`linearizing`), a rule's tangent that is not a tape value does not depend
// on the input tangents: zero.
absl::StatusOr<std::vector<int64_t>> WalkJvp(
    FunctionBuilder& b, AdEmitter& e, const Region& region, const std::vector<int64_t>& primals,
    bool linearizing, std::unordered_map<int64_t, int64_t>& tangent,
    std::vector<int64_t>* result_tangents) {
  if (primals.size() != static_cast<size_t>(region.params_size())) {
    return absl::InvalidArgumentError(fmt::format(
        "autodiff: the region takes {} values, got {}", region.params_size(), primals.size()));
  }
  std::unordered_map<int64_t, int64_t> value;  // region id -> builder id
  for (int i = 0; i < region.params_size(); ++i) value[region.params(i).id()] = primals[i];
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
    ASSIGN_OR_RETURN(std::vector<int64_t> results, b.AddOp(AttrsOnly(op), operands));
    for (int i = 0; i < op.results_size(); ++i) value[op.results(i)] = results[i];
    if (!any_tangent) continue;
    bool float_result = false;
    for (int64_t r : results) float_result = float_result || IsFloat(b.TypeOf(r).dtype);
    if (!float_result) continue;  // integer and pred results have no tangent
    const Primitive* prim = FindPrimitive(op.opcode());
    if (prim == nullptr || !prim->ad.jvp) return NoRule("Differentiation", op);
    ASSIGN_OR_RETURN(std::vector<int64_t> out,
                     prim->ad.jvp(e, JvpArgs{op, operands, tangents, results}));
    if (out.size() != results.size()) {
      return absl::InternalError(fmt::format("{}: its JVP rule gave {} tangents for {} results",
                                             op.opcode(), out.size(), results.size()));
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != kZero && IsFloat(b.TypeOf(results[i]).dtype) &&
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

}  // namespace

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
  ShapeContext ctx{b_.mesh(), b_.in_spmd(), [this](int64_t id) -> absl::StatusOr<ShapedType> {
                     return TypeOf(id);
                   }};
  ASSIGN_OR_RETURN(std::vector<ShapedType> result_types, InferResultTypes(ctx, types, op));
  LinearTape::Entry entry{AttrsOnly(op), operands, {}};
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
  for (int64_t d : shape) op.mutable_broadcast_in_dim()->add_shape(d);
  for (int64_t d : dims) op.mutable_broadcast_in_dim()->add_broadcast_dimensions(d);
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::Reshape(int64_t x, const std::vector<int64_t>& shape) {
  if (TypeOf(x).dims == shape) return x;
  Op op = Named("reshape");
  for (int64_t d : shape) op.mutable_reshape()->add_new_sizes(d);
  return Emit1(std::move(op), {x});
}

absl::StatusOr<int64_t> AdEmitter::Transpose(int64_t x, const std::vector<int64_t>& permutation) {
  Op op = Named("transpose");
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

absl::StatusOr<JvpResult> EmitJvp(FunctionBuilder& b, const Region& region,
                                  const std::vector<int64_t>& primals,
                                  const std::vector<int64_t>& tangents) {
  if (tangents.size() != primals.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "jvp: {} primals but {} tangents", primals.size(), tangents.size()));
  }
  std::unordered_map<int64_t, int64_t> tangent;
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (tangents[i] != kZero) tangent[region.params(i).id()] = tangents[i];
  }
  AdEmitter e(b);
  JvpResult out;
  ASSIGN_OR_RETURN(out.results,
                   WalkJvp(b, e, region, primals, /*linearizing=*/false, tangent, &out.tangents));
  return out;
}

Linearized::Linearized() : tape_(std::make_unique<LinearTape>()) {}
Linearized::Linearized(Linearized&&) = default;
Linearized& Linearized::operator=(Linearized&&) = default;
Linearized::~Linearized() = default;

absl::StatusOr<Linearized> Linearized::Linearize(FunctionBuilder& b, const Region& region,
                                                 const std::vector<int64_t>& primals,
                                                 const std::vector<bool>& wrt) {
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
    if (!IsFloat(type.dtype)) {
      return absl::InvalidArgumentError(fmt::format(
          "grad requires real-valued inputs (input dtype that is a sub-dtype of np.inexact), but "
          "got {} for input {}", DTypeName(type.dtype), i));
    }
    const int64_t t = lin.tape_->NewValue(type);
    lin.input_tangents_.push_back(t);
    tangent[region.params(static_cast<int>(i)).id()] = t;
  }
  AdEmitter e(b, lin.tape_.get());
  ASSIGN_OR_RETURN(lin.results_,
                   WalkJvp(b, e, region, primals, /*linearizing=*/true, tangent,
                           &lin.result_tangents_));
  return lin;
}

absl::StatusOr<std::vector<int64_t>> Linearized::Transpose(
    FunctionBuilder& b, const std::vector<int64_t>& cotangents) const {
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
    const Primitive* prim = FindPrimitive(it->op.opcode());
    if (prim == nullptr || !prim->ad.transpose) return NoRule("Transpose", it->op);
    std::vector<int64_t> operands;
    std::vector<bool> linear;
    std::vector<ShapedType> types;
    for (int64_t id : it->operands) {
      const bool is_tangent = id >= kTangentBase;
      linear.push_back(is_tangent);
      operands.push_back(is_tangent ? kZero : id);
      types.push_back(is_tangent ? tape_->types.at(id) : b.TypeOf(id));
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
    tangents.push_back(IsFloat(b.TypeOf(p).dtype) ? t : kZero);
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

absl::StatusOr<Function> VjpFunction(const Function& f, const Mesh* mesh, bool per_device) {
  FunctionBuilder b(mesh, per_device);
  const std::vector<int64_t> primals = AddParams(b, f.body());
  std::vector<bool> wrt;
  for (int64_t p : primals) wrt.push_back(IsFloat(b.TypeOf(p).dtype));
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
