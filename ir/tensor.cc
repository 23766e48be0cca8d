#include "ir/tensor.h"

#include <cstring>
#include <type_traits>

#include "ir/dtype_dispatch.h"

namespace shardjit::ir {

Tensor Tensor::Empty(const ShapedType& type, Allocator* allocator) {
  if (allocator == nullptr) allocator = HostAllocator();
  Tensor t;
  t.type_ = type;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->bytes = static_cast<size_t>(type.byte_size());
  t.storage_->allocator = allocator;
  t.storage_->keep_alive = allocator->KeepAlive();
  t.storage_->ptr = allocator->Allocate(t.storage_->bytes);
  return t;
}

Tensor Tensor::Future(const ShapedType& type, std::shared_ptr<AsyncValue> state) {
  Tensor t;
  t.type_ = type.AsFuture();
  t.future_ = std::move(state);
  return t;
}

Tensor Tensor::Zeros(const ShapedType& type, Allocator* allocator) {
  Tensor t = Empty(type, allocator);
  if (t.byte_size() > 0) std::memset(t.data(), 0, t.byte_size());
  return t;
}

Tensor Tensor::FromDoubles(const ShapedType& type, const std::vector<double>& values,
                           Allocator* allocator) {
  Tensor t = Empty(type, allocator);
  int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) t.SetDouble(i, values.size() == 1 ? values[0] : values[i]);
  return t;
}

double Tensor::GetDouble(int64_t i) const {
  return VisitDType(dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    return static_cast<double>(static_cast<ComputeType<T>>(data_as<T>()[i]));
  });
}

void Tensor::SetDouble(int64_t i, double v) {
  VisitDType(dtype(), [&](auto tag) {
    using T = decltype(tag);
    T& x = data_as<T>()[i];
    if constexpr (std::is_same_v<T, bf16>) {
      x = bf16(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, f16>) {
      x = f16(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      x = v != 0;
    } else {
      x = static_cast<T>(v);
    }
  });
}

std::vector<double> Tensor::ToDoubles() const {
  std::vector<double> out(num_elements());
  for (int64_t i = 0; i < num_elements(); ++i) out[i] = GetDouble(i);
  return out;
}

Tensor Tensor::Reshaped(const std::vector<int64_t>& dims) const {
  Tensor t = *this;
  t.type_.dims = dims;
  return t;
}

Tensor Tensor::Subrange(int64_t first, const ShapedType& type) const {
  Tensor t = *this;
  t.type_ = type;
  if (type.num_elements() > 0) t.offset_ += first * DTypeSize(type.dtype);
  return t;
}

Tensor Tensor::Copy(Allocator* allocator) const {
  Tensor t = Empty(type_, allocator);
  if (byte_size() > 0) std::memcpy(t.data(), data(), byte_size());
  return t;
}

}  // namespace shardjit::ir
