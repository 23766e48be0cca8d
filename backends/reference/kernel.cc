#include "backends/reference/kernel.h"

#include <map>

#include "absl/status/status.h"

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

}  // namespace shardjit::backends::reference
