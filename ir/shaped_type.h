// ShapedType: a dtype and a static shape, and the limits every verified type keeps to. No
// protobuf types: the public API (frontend/shardjit.h) includes it.
#ifndef SHARDJIT_IR_SHAPED_TYPE_H_
#define SHARDJIT_IR_SHAPED_TYPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/dtype.h"

namespace shardjit::ir {

// What a semaphore array counts (ir.proto SemaphoreKind).
enum class Semaphore { kNone = 0, kRegular = 1, kDma = 2 };

struct ShapedType {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;
  // The type of an in-flight asynchronous collective that produces an array of this dtype and
  // shape (ir.proto TensorType.future).
  bool future = false;
  // The type of a mutable buffer of this array inside a pallas_call kernel (TensorType.ref).
  bool ref = false;
  // An array of semaphores (dtype s32; only as a ref): TensorType.semaphore.
  Semaphore semaphore = Semaphore::kNone;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t num_elements() const;
  int64_t byte_size() const { return num_elements() * DTypeSize(dtype); }
  // "bf16[1024,1024]", "f32[]", "future[f32[2,3]]", "ref[f32[8,128]]", "ref[sem[2]]".
  std::string ToString() const;
  // The array type a future resolves to (itself for an array type), and the future of it.
  ShapedType Awaited() const { return {dtype, dims, false}; }
  ShapedType AsFuture() const { return {dtype, dims, true}; }
  // The array type a ref holds (itself for an array type), and the ref of it.
  ShapedType Array() const { return {dtype, dims, false, false, semaphore}; }
  ShapedType AsRef() const { return {dtype, dims, false, true, semaphore}; }
  // A ref to an array of semaphores of `kind`.
  static ShapedType SemaphoreRef(Semaphore kind, std::vector<int64_t> dims) {
    return {DType::kS32, std::move(dims), false, true, kind};
  }

  bool operator==(const ShapedType& o) const {
    return dtype == o.dtype && dims == o.dims && future == o.future && ref == o.ref &&
           semaphore == o.semaphore;
  }
  bool operator!=(const ShapedType& o) const { return !(*this == o); }
};

// Limits every verified module keeps to (ir/verifier.h; the text parser checks the nesting too):
// regions nested at most kMaxRegionDepth deep, arrays of rank at most kMaxRank and at most
// kMaxArrayBytes bytes, so that shape arithmetic on verified types cannot overflow int64.
inline constexpr int kMaxRegionDepth = 64;
inline constexpr int kMaxRank = 32;
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 48;
// Meshes have at most this many devices (so a dim times a group size fits in int64).
inline constexpr int64_t kMaxMeshDevices = int64_t{1} << 20;

// Shape arithmetic on dims not yet checked against the limits (attributes, or a verified dim
// times a mesh size): a * b and a + b, or nullopt when they overflow int64.
std::optional<int64_t> CheckedMul(int64_t a, int64_t b);
std::optional<int64_t> CheckedAdd(int64_t a, int64_t b);
// The element count of `dims` and its byte size at `dtype_bytes` per element; nullopt if a dim is
// negative or either overflows int64.
std::optional<int64_t> CheckedNumElements(const std::vector<int64_t>& dims);
std::optional<int64_t> CheckedByteSize(const std::vector<int64_t>& dims, int64_t dtype_bytes);
// OK, or InvalidArgument naming `t` when it breaks a limit above (negative dims included; for the
// byte limit zero dims count as ones).
absl::Status CheckTypeLimits(const ShapedType& t);

// Row-major strides in elements.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_SHAPED_TYPE_H_
