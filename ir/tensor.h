// Tensor: a dense row-major array (dtype, shape, shared immutable-by-convention storage). The
// storage is released through the Allocator that made it, which is how the runtime accounts
// memory per device. Copies of a Tensor share storage.
#ifndef SHARDJIT_IR_TENSOR_H_
#define SHARDJIT_IR_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/allocator.h"
#include "ir/shaped_type.h"

namespace shardjit::ir {

// The state of an in-flight asynchronous collective, owned by whoever runs it (the runtime). A
// Tensor of a future type holds one instead of storage.
class AsyncValue {
 public:
  virtual ~AsyncValue() = default;
};

class Tensor {
 public:
  Tensor() = default;

  // A value of type `type.AsFuture()` holding `state`.
  static Tensor Future(const ShapedType& type, std::shared_ptr<AsyncValue> state);

  // Uninitialised storage.
  static Tensor Empty(const ShapedType& type, Allocator* allocator = nullptr);
  static Tensor Zeros(const ShapedType& type, Allocator* allocator = nullptr);
  // From values converted to `dtype` (bf16 rounds to nearest even; pred is v != 0).
  static Tensor FromDoubles(const ShapedType& type, const std::vector<double>& values,
                            Allocator* allocator = nullptr);

  bool defined() const { return storage_ != nullptr || future_ != nullptr; }
  // The in-flight collective of a future-typed value; null for arrays.
  AsyncValue* future() const { return future_.get(); }
  const ShapedType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<int64_t>& dims() const { return type_.dims; }
  int64_t num_elements() const { return type_.num_elements(); }
  int64_t byte_size() const { return type_.byte_size(); }

  void* data() { return storage_ ? static_cast<char*>(storage_->ptr) + offset_ : nullptr; }
  const void* data() const {
    return storage_ ? static_cast<const char*>(storage_->ptr) + offset_ : nullptr;
  }
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }

  // Element i (row-major) as a double, and the inverse: slow, for tests and tools.
  double GetDouble(int64_t i) const;
  void SetDouble(int64_t i, double v);
  std::vector<double> ToDoubles() const;

  // The same storage viewed with another shape of the same element count.
  Tensor Reshaped(const std::vector<int64_t>& dims) const;
  // The `type.num_elements()` elements from row-major element `first` on, viewed as an array of
  // `type` (same dtype) in this storage: no copy. The range must lie inside this array.
  Tensor Subrange(int64_t first, const ShapedType& type) const;
  // A fresh copy in `allocator`'s memory.
  Tensor Copy(Allocator* allocator = nullptr) const;
  // Same storage object (zero-copy aliasing check).
  bool SharesStorageWith(const Tensor& other) const { return storage_ == other.storage_; }
  // Whether no other Tensor (copy, view or reshape) shares this storage, so whoever holds this
  // one may write into it in place. Meaningful only when no other thread can be copying this
  // Tensor at the same time (e.g. the evaluator moved it into a kernel's operands); a writer
  // should then issue an acquire fence, since the last other holder may have released its copy
  // on another thread.
  bool unique() const { return storage_ != nullptr && storage_.use_count() == 1; }

 private:
  struct Storage {
    void* ptr = nullptr;
    size_t bytes = 0;
    Allocator* allocator = nullptr;
    std::shared_ptr<Allocator> keep_alive;
    ~Storage() { allocator->Deallocate(ptr, bytes); }
  };
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<AsyncValue> future_;
  int64_t offset_ = 0;  // bytes from the storage's start to element 0 (non-zero in subranges)
  ShapedType type_;
};

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_TENSOR_H_
