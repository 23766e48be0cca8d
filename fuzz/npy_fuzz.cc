// Fuzzes the .npy reader: any bytes load or fail with a Status, never crash; a tensor that loads
// writes to bytes that load back to the same type and bits (bf16 files do not exist: shardjit
// writes bf16 as float32).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tools/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<shardjit::ir::Tensor> tensor = shardjit::tools::ParseNpy(bytes);
  if (!tensor.ok()) return 0;
  const std::string saved = shardjit::tools::SerializeNpy(*tensor);
  absl::StatusOr<shardjit::ir::Tensor> again = shardjit::tools::ParseNpy(saved);
  if (!again.ok() || again->type() != tensor->type() ||
      (tensor->byte_size() > 0 &&
       std::memcmp(again->data(), tensor->data(), tensor->byte_size()) != 0)) {
    std::abort();
  }
  return 0;
}
