// The pallas_call compiler (backends/x86/pallas_compiler.h): control flow inside kernels. cond
// runs the chosen branch's program, fori_loop and while_loop their regions' programs; operands,
// params, carries and results live in slots of their own (scalars in integer slots, arrays as
// tiles), copied between at region boundaries.
#include "backends/x86/pallas_compiler.h"

#include <algorithm>

#include "base/status_macros.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {
namespace {

std::vector<int64_t> Ids(const google::protobuf::RepeatedField<int64_t>& ids) {
  return {ids.begin(), ids.end()};
}
std::vector<int64_t> ParamIds(const ir::Region& region) {
  std::vector<int64_t> ids;
  for (const ir::Param& p : region.params()) ids.push_back(p.id());
  return ids;
}
std::vector<ir::ShapedType> ParamTypes(const ir::Region& region) {
  std::vector<ir::ShapedType> types;
  for (const ir::Param& p : region.params()) types.push_back(ir::FromProto(p.type()));
  return types;
}
std::vector<ir::ShapedType> ResultTypes(const ir::Op& op) {
  std::vector<ir::ShapedType> types;
  for (const ir::TensorType& t : op.result_types()) types.push_back(ir::FromProto(t));
  return types;
}

}  // namespace

absl::StatusOr<std::vector<Value>> Compiler::DefineSlots(const std::vector<int64_t>& ids,
                                                         const std::vector<ir::ShapedType>& types,
                                                         const std::string& what) {
  std::vector<Value> slots;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (types[i].ref || types[i].future) return Unsupported(what + " of refs or futures");
    Define(ids[i], IsScalarType(types[i]) ? Kind::kScalar : Kind::kTile, types[i]);
    slots.push_back(values_.at(ids[i]));
  }
  return slots;
}

std::function<void(Frame&)> Compiler::CopyInto(
    const std::vector<Value>& targets, const google::protobuf::RepeatedField<int64_t>& sources) {
  std::vector<std::function<int64_t(const Frame&)>> scalars;
  std::vector<std::function<ir::Tensor(Frame&)>> tiles;
  for (size_t i = 0; i < targets.size(); ++i) {
    const bool scalar = targets[i].kind == Kind::kScalar;
    scalars.push_back(scalar ? ScalarReader(sources[static_cast<int>(i)]) : nullptr);
    tiles.push_back(scalar ? nullptr : TensorReader(sources[static_cast<int>(i)]));
  }
  return [targets, scalars = std::move(scalars), tiles = std::move(tiles)](Frame& f) {
    const size_t n = targets.size();
    std::vector<int64_t> scalar_values(n);
    std::vector<ir::Tensor> tile_values(n);
    for (size_t i = 0; i < n; ++i) {
      if (scalars[i]) {
        scalar_values[i] = scalars[i](f);
      } else {
        tile_values[i] = tiles[i](f);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (scalars[i]) {
        f.scalars[targets[i].slot] = scalar_values[i];
      } else {
        f.tiles[targets[i].slot] = std::move(tile_values[i]);
      }
    }
  };
}

absl::Status Compiler::Cond(const ir::Op& op, Program& out) {
  auto index = ScalarReader(op.operands(0));
  google::protobuf::RepeatedField<int64_t> args(op.operands().begin() + 1, op.operands().end());
  ASSIGN_OR_RETURN(std::vector<Value> results,
                   DefineSlots(Ids(op.results()), ResultTypes(op), "a cond"));
  struct Branch {
    std::function<void(Frame&)> enter, leave;
    Program program;
  };
  std::vector<Branch> branches(op.cond().branches_size());
  for (int b = 0; b < op.cond().branches_size(); ++b) {
    const ir::Region& region = op.cond().branches(b);
    if (region.params_size() != args.size() || region.results_size() != op.results_size()) {
      return Unsupported("a cond whose branches do not match its operands and results");
    }
    ASSIGN_OR_RETURN(std::vector<Value> params,
                     DefineSlots(ParamIds(region), ParamTypes(region), "a cond"));
    branches[b].enter = CopyInto(params, args);
    RETURN_IF_ERROR(CompileRegion(region, branches[b].program));
    branches[b].leave = CopyInto(results, region.results());
  }
  out.push_back([index, branches = std::move(branches)](Frame& f) -> absl::Status {
    const int64_t n = static_cast<int64_t>(branches.size());
    const Branch& branch = branches[std::clamp<int64_t>(index(f), 0, n - 1)];
    branch.enter(f);
    RETURN_IF_ERROR(RunProgram(branch.program, f));
    branch.leave(f);
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status Compiler::ForiLoop(const ir::Op& op, Program& out) {
  const ir::ForiLoopAttrs& loop = op.fori_loop();
  const ir::Region& body = loop.body();
  if (body.params_size() != op.operands_size() + 1 ||
      body.results_size() != op.operands_size() || op.results_size() != op.operands_size()) {
    return Unsupported("a fori_loop whose carries do not match its operands");
  }
  const int index_slot = NewScalar();
  values_[body.params(0).id()] = {Kind::kScalar, index_slot,
                                  ir::ShapedType{ir::DType::kS32, {}}};
  std::vector<int64_t> carry_ids = ParamIds(body);
  std::vector<ir::ShapedType> carry_types = ParamTypes(body);
  carry_ids.erase(carry_ids.begin());
  carry_types.erase(carry_types.begin());
  // The body's params hold the carries; the op's results are the last ones.
  ASSIGN_OR_RETURN(std::vector<Value> carries, DefineSlots(carry_ids, carry_types, "a fori_loop"));
  auto init = CopyInto(carries, op.operands());
  Program program;
  RETURN_IF_ERROR(CompileRegion(body, program));
  auto next = CopyInto(carries, body.results());
  for (int i = 0; i < op.results_size(); ++i) values_[op.results(i)] = carries[i];
  const int64_t lower = loop.lower(), upper = loop.upper();
  out.push_back([=, program = std::move(program)](Frame& f) -> absl::Status {
    init(f);
    for (int64_t i = lower; i < upper; ++i) {
      f.scalars[index_slot] = i;
      RETURN_IF_ERROR(RunProgram(program, f));
      next(f);
    }
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status Compiler::WhileLoop(const ir::Op& op, Program& out) {
  const ir::WhileLoopAttrs& loop = op.while_loop();
  if (loop.cond().params_size() != op.operands_size() || loop.cond().results_size() != 1 ||
      loop.body().params_size() != op.operands_size() ||
      loop.body().results_size() != op.operands_size()) {
    return Unsupported("a while_loop whose regions do not match its carries");
  }
  ASSIGN_OR_RETURN(std::vector<Value> carries,
                   DefineSlots(Ids(op.results()), ResultTypes(op), "a while_loop"));
  ASSIGN_OR_RETURN(std::vector<Value> cond_params,
                   DefineSlots(ParamIds(loop.cond()), ParamTypes(loop.cond()), "a while_loop"));
  ASSIGN_OR_RETURN(std::vector<Value> body_params,
                   DefineSlots(ParamIds(loop.body()), ParamTypes(loop.body()), "a while_loop"));
  auto init = CopyInto(carries, op.operands());
  auto to_cond = CopyInto(cond_params, op.results());
  auto to_body = CopyInto(body_params, op.results());
  Program cond, body;
  RETURN_IF_ERROR(CompileRegion(loop.cond(), cond));
  RETURN_IF_ERROR(CompileRegion(loop.body(), body));
  auto go = ScalarReader(loop.cond().results(0));
  auto next = CopyInto(carries, loop.body().results());
  out.push_back([=, cond = std::move(cond), body = std::move(body)](Frame& f) -> absl::Status {
    init(f);
    while (true) {
      // A loop that never ends still stops at the run's deadline or cancellation.
      RETURN_IF_ERROR(f.gemm_parallel.stop.Check());
      to_cond(f);
      RETURN_IF_ERROR(RunProgram(cond, f));
      if (go(f) == 0) return absl::OkStatus();
      to_body(f);
      RETURN_IF_ERROR(RunProgram(body, f));
      next(f);
    }
  });
  return absl::OkStatus();
}

}  // namespace shardjit::backends::x86::pallas
