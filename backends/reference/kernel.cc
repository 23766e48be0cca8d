#include "backends/reference/kernel.h"

#include <map>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/primitive.h"

namespace shardjit::backends::reference {
namespace {

std::map<std::string, Kernel, std::less<>>& Kernels() {
  static auto* kernels = new std::map<std::string, Kernel, std::less<>>();
  return *kernels;
}

}  // namespace

bool RegisterKernel(std::string name, Kernel kernel) {
  return Kernels().emplace(std::move(name), std::move(kernel)).second;
}

const Kernel* FindKernel(std::string_view name) {
  auto it = Kernels().find(name);
  return it == Kernels().end() ? nullptr : &it->second;
}

absl::StatusOr<std::vector<ir::Tensor>> EvaluateLocalOp(const ir::Op& op,
                                                        const std::vector<ir::Tensor>& operands) {
  const Kernel* kernel = FindKernel(op.opcode());
  if (kernel == nullptr) {
    return absl::NotFoundError(op.opcode() + ": no reference kernel is registered");
  }
  return (*kernel)(op, operands, ir::HostAllocator());
}

ir::ShapedType ResultType(const ir::Op& op, int i) { return ir::FromProto(op.result_types(i)); }

absl::Status CheckOperandTypes(const ir::Op& op, const std::vector<ir::Tensor>& operands) {
  std::vector<ir::ShapedType> types;
  types.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].defined()) {
      return absl::InvalidArgumentError(fmt::format("{}: operand {} is undefined", op.opcode(), i));
    }
    types.push_back(operands[i].type());
  }
  ASSIGN_OR_RETURN(std::vector<ir::ShapedType> want, ir::InferResultTypes({}, types, op));
  std::vector<ir::ShapedType> declared;
  for (int i = 0; i < op.result_types_size(); ++i) declared.push_back(ResultType(op, i));
  if (want != declared) {
    return absl::InvalidArgumentError(
        fmt::format("{}: declared result types ({}) differ from ({}) given by the shape rule for "
                    "operands ({})",
                    op.opcode(), ir::TypesToString(declared), ir::TypesToString(want),
                    ir::TypesToString(types)));
  }
  return absl::OkStatus();
}

}  // namespace shardjit::backends::reference
