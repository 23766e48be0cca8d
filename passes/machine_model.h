// The machine the cost models price programs for: how fast a device computes, and what moving
// bytes between devices costs. The partitioner chooses among its plans by the time this model
// gives them (passes/spmd/rules.h), collective-fusion chooses its rings by it
// (passes/collective_fusion.h), and cost analysis reports it (passes/cost_analysis.h). The
// lowering pipeline records the model it used in the module (ir::Module::machine_model).
//
// The defaults are one core of the slowest CPU these programs run on (Zen 3, AVX2 only: its f32
// GEMM reaches ~95 GFLOP/s), copies of MiB-sized blocks between devices of one process (memcpy
// moves 16-46 GB/s once out of L2) and a rendezvous that may wake a sleeping thread (~27 us
// across cores, a few us when the peer spins or shares the thread). A backend offers its own
// (backends/backend.h): the x86 backend's are this host's rates, measured once and kept.
#ifndef SHARDJIT_PASSES_MACHINE_MODEL_H_
#define SHARDJIT_PASSES_MACHINE_MODEL_H_

#include <cstdint>
#include <string>

namespace shardjit::ir {
class MachineModel;
}  // namespace shardjit::ir

namespace shardjit::passes {

struct MachineModel {
  double flops_per_second = 1e11;
  double bytes_per_second = 2e10;
  // One rendezvous of a collective, e.g. one step of a collective-matmul ring.
  double seconds_per_collective = 1e-5;
  // Where the figures come from (recorded with them; not part of the comparison).
  std::string source = "defaults";

  bool operator==(const MachineModel& o) const {
    return flops_per_second == o.flops_per_second && bytes_per_second == o.bytes_per_second &&
           seconds_per_collective == o.seconds_per_collective;
  }

  // Estimated seconds of `flops` of computation and `collectives` collectives moving `bytes`.
  double Seconds(int64_t flops, int64_t bytes, int64_t collectives) const {
    return static_cast<double>(flops) / flops_per_second +
           static_cast<double>(bytes) / bytes_per_second +
           static_cast<double>(collectives) * seconds_per_collective;
  }

  // The ir.proto form (ir/ir.pb.h declares it).
  ir::MachineModel ToProto() const;
  static MachineModel FromProto(const ir::MachineModel& p);
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_MACHINE_MODEL_H_
