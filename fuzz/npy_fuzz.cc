// Fuzzes the .npy reader: any bytes load or fail with a Status, never crash; a tensor that loads
// writes to bytes that load back to the same type and bits (bf16, read from '<V2', is written as
// float32: it loads back as f32 of the same values).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "ir/types.h"
#include "tools/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<shardjit::ir::Tensor> tensor = shardjit::tools::ParseNpy(bytes);
  if (!tensor.ok()) return 0;
  const std::string saved = shardjit::tools::SerializeNpy(*tensor);
  absl::StatusOr<shardjit::ir::Tensor> again = shardjit::tools::ParseNpy(saved);
  if (tensor->dtype() == shardjit::ir::DType::kBF16) {
    // Widened to f32 it may pass the size limit (an empty array of huge other dims).
    if (!shardjit::ir::CheckTypeLimits({shardjit::ir::DType::kF32, tensor->dims()}).ok()) return 0;
    if (!again.ok() || again->dtype() != shardjit::ir::DType::kF32 ||
        again->dims() != tensor->dims()) {
      std::abort();
    }
    const float* widened = again->data_as<float>();
    const uint16_t* bits = static_cast<const uint16_t*>(tensor->data());
    for (int64_t i = 0; i < tensor->num_elements(); ++i) {
      uint32_t w;
      std::memcpy(&w, &widened[i], sizeof(w));
      if (static_cast<uint16_t>(w >> 16) != bits[i] || (w & 0xffff) != 0) std::abort();
    }
    return 0;
  }
  if (!again.ok() || again->type() != tensor->type() ||
      (tensor->byte_size() > 0 &&
       std::memcmp(again->data(), tensor->data(), tensor->byte_size()) != 0)) {
    std::abort();
  }
  return 0;
}
