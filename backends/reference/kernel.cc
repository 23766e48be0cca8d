#include "backends/reference/kernel.h"

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <type_traits>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype_dispatch.h"
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

ir::Tensor WritableOrCopy(const ir::Tensor& x, ir::Allocator* allocator) {
  if (!x.unique()) return x.Copy(allocator);
  std::atomic_thread_fence(std::memory_order_acquire);
  return x;
}

ir::Tensor GatherFill(const ir::GatherAttrs& a, ir::DType dtype) {
  if (!a.has_fill_bits()) return ir::Tensor::FromDoubles({dtype, {}}, {a.fill_value()});
  ir::Tensor fill = ir::Tensor::Empty({dtype, {}});
  const uint64_t bits = a.fill_bits();
  static_assert(std::endian::native == std::endian::little, "fill_bits' low bytes come first");
  std::memcpy(fill.data(), &bits, fill.byte_size());
  return fill;
}

int64_t IndexValue(const ir::Tensor& t, int64_t i) {
  return ir::VisitDType(t.dtype(), [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, uint64_t>) {
      const uint64_t v = t.data_as<uint64_t>()[i];
      return v > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(v);
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return static_cast<int64_t>(t.data_as<T>()[i]);
    } else {
      return static_cast<int64_t>(t.GetDouble(i));  // not an index dtype: refused by the rules
    }
  });
}

std::vector<int64_t> IndexValues(const ir::Tensor& t) {
  std::vector<int64_t> out(t.num_elements());
  ir::VisitDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                  !std::is_same_v<T, uint64_t>) {
      const T* p = t.data_as<T>();
      for (int64_t i = 0; i < t.num_elements(); ++i) out[i] = static_cast<int64_t>(p[i]);
    } else {
      for (int64_t i = 0; i < t.num_elements(); ++i) out[i] = IndexValue(t, i);
    }
  });
  return out;
}

}  // namespace shardjit::backends::reference
