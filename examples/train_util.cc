#include "examples/train_util.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace shardjit::examples {

absl::StatusOr<std::pair<int64_t, int64_t>> ParseMeshFlag(const std::string& mesh) {
  const std::vector<std::string> sizes = absl::StrSplit(mesh, 'x');
  int64_t a = 0, b = 0;
  if (sizes.size() != 2 || !absl::SimpleAtoi(sizes[0], &a) || !absl::SimpleAtoi(sizes[1], &b) ||
      a < 1 || b < 1) {
    return absl::InvalidArgumentError("--mesh must be AxB, got \"" + mesh + "\"");
  }
  return std::make_pair(a, b);
}

absl::StatusOr<bool> ParseOptimizerFlag(const std::string& optimizer) {
  if (optimizer != "adam" && optimizer != "sgd") {
    return absl::InvalidArgumentError("--optimizer must be sgd or adam, got \"" + optimizer +
                                      "\"");
  }
  return optimizer == "adam";
}

absl::StatusOr<Array> RandomArray(const Mesh& mesh, uint32_t seed,
                                  const std::vector<int64_t>& shape, const PartitionSpec& spec,
                                  float scale) {
  ASSIGN_OR_RETURN(Tensor host, random::normal(random::key(seed), shape, DType::kF32));
  for (int64_t i = 0; i < host.num_elements(); ++i) host.data_as<float>()[i] *= scale;
  return device_put(host, NamedSharding(mesh, spec));
}

}  // namespace shardjit::examples
