// mpmd_map (seed 002): several (mesh positions, function) pairs over one mesh, each position
// running its own program, in one per-device module whose `position_functions` say which
// function each position runs. Each function is traced like a shard_map body over the whole mesh
// (the same in_specs and out_specs, so every program takes the same local blocks and returns
// blocks of the same types); collectives name the mesh's axes, and programs exchange data with
// psend / precv (or collectives every program of a group runs alike).
#ifndef SHARDJIT_FRONTEND_MPMD_H_
#define SHARDJIT_FRONTEND_MPMD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/array.h"
#include "frontend/jit.h"
#include "frontend/traced_function.h"

namespace shardjit::ir {
class Module;
}  // namespace shardjit::ir

namespace shardjit {

// One program of an mpmd_map: the mesh positions that run it and its function.
struct MpmdProgram {
  std::vector<int64_t> positions;
  TracedFunction fn;
};
template <typename F>
MpmdProgram Program(std::vector<int64_t> positions, F f) {
  return {std::move(positions), MakeTracedFunction(std::move(f))};
}
// The positions of `mesh` whose coordinate along `axis` is `index` (a stage of a pipeline).
std::vector<int64_t> PositionsAt(const Mesh& mesh, const std::string& axis, int64_t index);

class MpmdMapped {
 public:
  MpmdMapped(Mesh mesh, std::vector<MpmdProgram> programs, std::vector<PartitionSpec> in_specs,
             std::vector<PartitionSpec> out_specs, JitOptions options);

  // Compiles every program for the arguments' types (cached) and runs them together. Errors: a
  // position in no program or in two, programs whose results differ in type, and what a run of
  // them fails with (a precv whose psend never comes, a psend nobody receives, mismatched types).
  absl::StatusOr<std::vector<Array>> call(const std::vector<Array>& args,
                                          const RunOptions& options = {}) const;
  template <typename... A>
  absl::StatusOr<std::vector<Array>> operator()(const A&... args) const {
    return call(std::vector<Array>{args...});
  }
  // The MPMD module for these arguments: each program's lowered per-device function, and
  // `position_functions` naming the one each mesh position runs (ir::PrintModule prints it; the
  // module is an ir.proto message: include ir/ir.pb.h to use it).
  absl::StatusOr<ir::Module> lower(const std::vector<Array>& args) const;
  template <typename... A>
  auto lower(const A&... args) const {
    return lower(std::vector<Array>{args...});
  }

 private:
  struct Compiled;
  struct State;
  absl::StatusOr<std::shared_ptr<const Compiled>> Compile(const std::vector<Array>& args) const;
  std::shared_ptr<State> state_;
};

MpmdMapped mpmd_map(Mesh mesh, std::vector<MpmdProgram> programs,
                    std::vector<PartitionSpec> in_specs, std::vector<PartitionSpec> out_specs,
                    JitOptions options = {});

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_MPMD_H_
