// Array: a global array laid out over a mesh by a NamedSharding, one block (shard) per device.
#ifndef SHARDJIT_FRONTEND_ARRAY_H_
#define SHARDJIT_FRONTEND_ARRAY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "frontend/sharding.h"
#include "ir/dtype.h"
#include "ir/shaped_type.h"
#include "ir/tensor.h"

namespace shardjit {

using DType = ir::DType;
using ShapedType = ir::ShapedType;
using Tensor = ir::Tensor;
using ir::bf16;

class Array {
 public:
  // `shards[p]` is the block of mesh position p, on its device (positions of a process holding the
  // same block may share one buffer, as device_put makes them); in a job of several processes,
  // undefined (Tensor()) where p's device belongs to another process. Shards are read-only.
  Array(ShapedType type, NamedSharding sharding, std::vector<Tensor> shards)
      : type_(std::move(type)), sharding_(std::move(sharding)), shards_(std::move(shards)) {}

  const ShapedType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<int64_t>& shape() const { return type_.dims; }
  const NamedSharding& sharding() const { return sharding_; }
  const std::vector<Tensor>& shards() const { return shards_; }

  // Whether this process holds every block of the array (always, in a job of one process).
  bool fully_addressable() const;
  // The whole array in host memory (blocks of replicated axes are taken from the lowest mesh
  // position that holds them). FailedPrecondition, naming the blocks' processes, when some block
  // lives only in other processes: process_allgather gathers those.
  absl::StatusOr<Tensor> to_host() const;

 private:
  ShapedType type_;
  NamedSharding sharding_;
  std::vector<Tensor> shards_;
};

// The whole array in host memory on every process of the job, like JAX's
// multihost_utils.process_allgather: every process must call it for the same array (the k-th
// calls meet), each contributing the blocks it holds.
absl::StatusOr<Tensor> process_allgather(const Array& array);

// Lays out a host tensor over a mesh, keeping the blocks of this process's devices; errors name a
// spec that does not divide a dimension.
absl::StatusOr<Array> device_put(const Tensor& host, const NamedSharding& sharding);
// Re-lays out an array (any sharding to any sharding, on the same runtime). An array not fully
// addressable goes through process_allgather: every process must call it.
absl::StatusOr<Array> device_put(const Array& array, const NamedSharding& sharding);

// Host tensors from values (converted to `dtype`).
Tensor HostTensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values);

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_ARRAY_H_
