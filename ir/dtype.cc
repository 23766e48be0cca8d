#include "ir/dtype.h"

namespace shardjit::ir {

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kS32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kPred:
      return 1;
    case DType::kInvalid:
      break;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kS32:
      return "s32";
    case DType::kPred:
      return "pred";
    case DType::kInvalid:
      break;
  }
  return "invalid";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kS32, DType::kPred}) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

bool IsFloating(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16; }

}  // namespace shardjit::ir
