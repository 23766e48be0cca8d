// Mesh, PartitionSpec and NamedSharding: how a global array is laid out over virtual devices.
#ifndef SHARDJIT_FRONTEND_SHARDING_H_
#define SHARDJIT_FRONTEND_SHARDING_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/run_options.h"
#include "runtime/runtime.h"

// The ir.proto messages behind Mesh and PartitionSpec (ir/ir.pb.h defines them; code that reads
// proto() includes it).
namespace shardjit::ir {
class Mesh;
class PartitionSpec;
}  // namespace shardjit::ir

namespace shardjit {

using Runtime = runtime::Runtime;
using RuntimeOptions = runtime::RuntimeOptions;
using RunOptions = runtime::RunOptions;
using CancellationToken = runtime::CancellationToken;

class Mesh;

// jax.make_mesh: a mesh of `runtime`'s devices with axes major to minor, e.g. {{"x", 2}, {"y",
// 2}}. Devices default to 0..size-1 row-major.
absl::StatusOr<Mesh> make_mesh(const Runtime& runtime,
                               std::vector<std::pair<std::string, int64_t>> axes,
                               std::vector<int64_t> device_ids = {});

// A logical mesh of a runtime's devices with named axes. A mesh refers to its runtime without
// keeping it alive: once the runtime is destroyed, runtime() and what needs it (device_put,
// running a program on the mesh) fail with FailedPrecondition.
class Mesh {
 public:
  // Copies share the proto; a move copies too, so no Mesh is ever left without one.
  Mesh(const Mesh&) = default;
  Mesh& operator=(const Mesh&) = default;

  const ir::Mesh& proto() const { return *proto_; }
  // The runtime whose devices the mesh names; FailedPrecondition once it has been destroyed.
  absl::StatusOr<Runtime*> runtime() const;
  // Runtime::id of the mesh's runtime (kept after the runtime is destroyed).
  uint64_t runtime_id() const { return runtime_id_; }
  int64_t size() const;
  // Size of axis `name`, 0 if there is none.
  int64_t axis_size(const std::string& name) const;
  std::string to_string() const;
  bool operator==(const Mesh& o) const;

 private:
  friend absl::StatusOr<Mesh> make_mesh(const Runtime& runtime,
                                        std::vector<std::pair<std::string, int64_t>> axes,
                                        std::vector<int64_t> device_ids);
  Mesh(const Runtime& runtime, std::shared_ptr<const ir::Mesh> proto)
      : runtime_(runtime.ref()), runtime_id_(runtime.id()), proto_(std::move(proto)) {}
  std::shared_ptr<const runtime::RuntimeRef> runtime_;
  uint64_t runtime_id_;
  // Immutable and shared by copies: every array and sharding holds its mesh, and a call of a
  // jitted program copies and compares them.
  std::shared_ptr<const ir::Mesh> proto_;
};

struct NoneType {};
// Marks a replicated dimension in a PartitionSpec: P("x", None).
inline constexpr NoneType None{};

// Several mesh axes for one dimension: P(Axes{"x", "y"}, None).
struct Axes {
  Axes(std::initializer_list<std::string> names) : names(names) {}
  std::vector<std::string> names;
};

// One dimension's entry of a PartitionSpec.
struct SpecEntry {
  SpecEntry(NoneType) {}
  SpecEntry(const char* axis) : axes{axis} {}
  SpecEntry(std::string axis) : axes{std::move(axis)} {}
  SpecEntry(Axes a) : axes(std::move(a.names)) {}
  std::vector<std::string> axes;
};

// jax.sharding.PartitionSpec.
class PartitionSpec {
 public:
  PartitionSpec() = default;
  explicit PartitionSpec(std::vector<SpecEntry> entries);
  explicit PartitionSpec(const ir::PartitionSpec& proto);
  const ir::PartitionSpec& proto() const;
  std::string to_string() const;
  bool operator==(const PartitionSpec& o) const;

 private:
  // Immutable and shared by copies; null: every dimension replicated.
  std::shared_ptr<const ir::PartitionSpec> proto_;
};

template <typename... Args>
PartitionSpec P(Args&&... args) {
  return PartitionSpec(std::vector<SpecEntry>{SpecEntry(std::forward<Args>(args))...});
}

// A mesh and a PartitionSpec.
class NamedSharding {
 public:
  NamedSharding(Mesh mesh, PartitionSpec spec) : mesh_(std::move(mesh)), spec_(std::move(spec)) {}
  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  std::string to_string() const;
  bool operator==(const NamedSharding& o) const {
    return mesh_ == o.mesh_ && spec_ == o.spec_;
  }

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_SHARDING_H_
