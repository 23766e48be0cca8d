#include "ir/primitive.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/collective_groups.h"
#include "ir/fmt_absl.h"

namespace shardjit::ir {
namespace {

std::map<std::string, Primitive, std::less<>>& Registry() {
  static auto* registry = new std::map<std::string, Primitive, std::less<>>();
  return *registry;
}

// The registered primitives by Prim (node addresses in Registry() are stable).
std::array<const Primitive*, kPrimCount>& ByPrim() {
  static auto* by_prim = new std::array<const Primitive*, kPrimCount>{};
  return *by_prim;
}

std::string AttrsCaseName(Op::AttrsCase c) {
  if (c == Op::ATTRS_NOT_SET) return "none";
  const auto* field = Op::descriptor()->FindFieldByNumber(static_cast<int>(c));
  return field ? field->name() : "?";
}

}  // namespace

bool RegisterPrimitive(Primitive primitive) {
  // A name without a Prim is registered all the same (kUnknown): ir/prim_test.cc names it.
  primitive.prim = PrimFromName(primitive.name);
  std::string name = primitive.name;
  auto [it, inserted] = Registry().emplace(std::move(name), std::move(primitive));
  if (inserted && it->second.prim != Prim::kUnknown) {
    ByPrim()[static_cast<int>(it->second.prim)] = &it->second;
  }
  return inserted;
}

const Primitive* FindPrimitive(std::string_view name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

const Primitive* FindPrimitive(Prim prim) {
  const int i = static_cast<int>(prim);
  return i > 0 && i < kPrimCount ? ByPrim()[i] : nullptr;
}

bool IsElementwise(Prim prim) {
  const Primitive* p = FindPrimitive(prim);
  return p != nullptr && p->kind == PrimitiveKind::kElementwise;
}

bool IsCollective(Prim prim) {
  const Primitive* p = FindPrimitive(prim);
  return p != nullptr && p->kind == PrimitiveKind::kCollective;
}

std::vector<const Primitive*> AllPrimitives() {
  std::vector<const Primitive*> all;
  for (const auto& [name, p] : Registry()) all.push_back(&p);
  return all;
}

std::string TypesToString(const std::vector<ShapedType>& types) {
  return absl::StrJoin(types, ", ", [](std::string* out, const ShapedType& t) {
    out->append(t.ToString());
  });
}

absl::StatusOr<std::vector<ShapedType>> InferResultTypes(const ShapeContext& ctx,
                                                         const std::vector<ShapedType>& operands,
                                                         const Op& op) {
  const Primitive* prim = FindPrimitive(PrimOf(op));
  if (prim == nullptr) {
    return absl::InvalidArgumentError(fmt::format("unknown primitive \"{}\"", op.opcode()));
  }
  int n = static_cast<int>(operands.size());
  if (n < prim->min_operands || (prim->max_operands >= 0 && n > prim->max_operands)) {
    std::string expected = prim->max_operands < 0
                               ? fmt::format("at least {}", prim->min_operands)
                           : prim->min_operands == prim->max_operands
                               ? fmt::format("{}", prim->min_operands)
                               : fmt::format("{} to {}", prim->min_operands, prim->max_operands);
    return absl::InvalidArgumentError(fmt::format("{}: expects {} operands, got {} ({})",
                                                  op.opcode(), expected, n,
                                                  TypesToString(operands)));
  }
  if (op.attrs_case() != prim->attrs_case) {
    return absl::InvalidArgumentError(fmt::format("{}: expects attributes of kind {}, got {}",
                                                  op.opcode(), AttrsCaseName(prim->attrs_case),
                                                  AttrsCaseName(op.attrs_case())));
  }
  for (const ShapedType& t : operands) {
    if (t.dtype == DType::kInvalid || !DTypeProto_IsValid(ToProto(t.dtype)) ||
        std::any_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d < 0; })) {
      return absl::InvalidArgumentError(
          fmt::format("{}: invalid operand type {}", op.opcode(), t.ToString()));
    }
  }
  // Futures are read only by their *_done (and carried by fori_loop); see ir/async.h.
  if (!IsAsyncDone(prim->prim) && prim->prim != Prim::kForiLoop) {
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].future) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: operand {} is a future ({}); only its *_done may read it", op.opcode(), i,
            operands[i].ToString()));
      }
    }
  }
  // Refs are read and written only by the kernel ops made for them (ir/prims/pallas.cc).
  if (!IsRefOp(prim->prim)) {
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].ref) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: operand {} is a ref ({}); read it with ref_load first", op.opcode(), i,
            operands[i].ToString()));
      }
    }
  }
  if (prim->kind == PrimitiveKind::kKernel && ctx.kernel_grid_rank < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: only allowed inside a pallas_call kernel (operands {})", op.opcode(),
        TypesToString(operands)));
  }
  // Inside a kernel a device asks where it is; it talks to peers only through semaphores.
  if (prim->kind == PrimitiveKind::kCollective && ctx.kernel_grid_rank >= 0 &&
      prim->prim != Prim::kAxisIndex && prim->prim != Prim::kAxisSize) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: collectives cannot run inside a pallas_call kernel (only axis_index and axis_size; "
        "kernels reach other devices with dma_start and semaphore_signal)",
        op.opcode()));
  }
  bool over_named_axes = !ctx.named_axes.empty();
  for (const std::string& a : CollectiveAxes(op)) {
    over_named_axes = over_named_axes && std::find(ctx.named_axes.begin(), ctx.named_axes.end(),
                                                   a) != ctx.named_axes.end();
  }
  if (prim->kind == PrimitiveKind::kCollective && !ctx.in_spmd && !over_named_axes) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: collectives need a mapped axis: use inside shard_map or a per-device module "
        "(operands {})",
        op.opcode(), TypesToString(operands)));
  }
  return prim->shape_rule(ctx, operands, op);
}

}  // namespace shardjit::ir
