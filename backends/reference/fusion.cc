// Reference kernel of `fusion`: runs the body's ops one by one on whole tensors with their
// reference kernels (so a fusion computes exactly what its unfused ops compute). Intermediates are
// released after their last use inside the body.
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "backends/reference/kernel.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/tensor.h"

namespace shardjit::backends::reference {
namespace {

absl::StatusOr<std::vector<ir::Tensor>> Fusion(const ir::Op& op,
                                               const std::vector<ir::Tensor>& operands,
                                               ir::Allocator* allocator) {
  const ir::Region& body = op.fusion().body();
  if (operands.size() != static_cast<size_t>(body.params_size())) {
    return absl::InvalidArgumentError(fmt::format("fusion: {} operands for {} body params",
                                                  operands.size(), body.params_size()));
  }
  std::unordered_map<int64_t, int> last_use;
  for (int i = 0; i < body.ops_size(); ++i) {
    for (int64_t id : body.ops(i).operands()) last_use[id] = i;
  }
  for (int64_t id : body.results()) last_use[id] = body.ops_size();
  std::unordered_map<int64_t, ir::Tensor> env;
  for (int i = 0; i < body.params_size(); ++i) env[body.params(i).id()] = operands[i];
  std::vector<ir::Tensor> args;
  for (int i = 0; i < body.ops_size(); ++i) {
    const ir::Op& inner = body.ops(i);
    const Kernel* kernel = FindKernel(inner.opcode());
    if (kernel == nullptr) {
      return absl::UnimplementedError(
          fmt::format("fusion: body op {} has no reference kernel", inner.opcode()));
    }
    args.clear();
    for (int64_t id : inner.operands()) {
      auto it = env.find(id);
      if (it == env.end()) {
        return absl::InvalidArgumentError(
            fmt::format("fusion: body op {} reads an undefined value", inner.opcode()));
      }
      args.push_back(it->second);
    }
    ASSIGN_OR_RETURN(std::vector<ir::Tensor> results, (*kernel)(inner, args, allocator));
    for (int r = 0; r < inner.results_size(); ++r) env[inner.results(r)] = results[r];
    for (int64_t id : inner.operands()) {
      if (last_use[id] == i) env.erase(id);
    }
  }
  std::vector<ir::Tensor> out;
  for (int64_t id : body.results()) {
    auto it = env.find(id);
    if (it == env.end()) return absl::InvalidArgumentError("fusion: body result is undefined");
    out.push_back(it->second);
  }
  return out;
}

const bool registered = RegisterKernel("fusion", Fusion);

}  // namespace
}  // namespace shardjit::backends::reference
