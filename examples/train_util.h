// What the training mains share: their --mesh=AxB and --optimizer=sgd|adam flags checked, and
// scaled random normal arrays laid out on a mesh.
#ifndef SHARDJIT_EXAMPLES_TRAIN_UTIL_H_
#define SHARDJIT_EXAMPLES_TRAIN_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/shardjit.h"

namespace shardjit::examples {

// "AxB" -> (A, B); InvalidArgument otherwise.
absl::StatusOr<std::pair<int64_t, int64_t>> ParseMeshFlag(const std::string& mesh);
// "adam" -> true, "sgd" -> false; InvalidArgument otherwise.
absl::StatusOr<bool> ParseOptimizerFlag(const std::string& optimizer);
// f32 normal values of `seed` times `scale`, laid out by `spec` on `mesh`.
absl::StatusOr<Array> RandomArray(const Mesh& mesh, uint32_t seed,
                                  const std::vector<int64_t>& shape, const PartitionSpec& spec,
                                  float scale);

}  // namespace shardjit::examples

#endif  // SHARDJIT_EXAMPLES_TRAIN_UTIL_H_
