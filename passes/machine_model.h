// The machine the cost models price programs for: how fast a device computes, and what moving
// bytes between devices costs. The partitioner chooses among its plans by the time this model
// gives them (passes/spmd/rules.h), and cost analysis reports it (passes/cost_analysis.h).
//
// The defaults are one core of the slowest CPU these programs run on here (Zen 3, AVX2 only: its
// f32 GEMM reaches ~95 GFLOP/s), copies of MiB-sized blocks between devices of one process
// (memcpy moves 16-46 GB/s once out of L2) and a rendezvous that may wake a sleeping thread
// (~27 us across cores, a few us when the peer spins or shares the thread). jit on the x86
// backend replaces the first two by this host's rates, measured once (backends/x86/host_rates.h).
#ifndef SHARDJIT_PASSES_MACHINE_MODEL_H_
#define SHARDJIT_PASSES_MACHINE_MODEL_H_

#include <cstdint>

namespace shardjit::passes {

struct MachineModel {
  double flops_per_second = 1e11;
  double bytes_per_second = 2e10;
  double seconds_per_collective = 1e-5;

  bool operator==(const MachineModel&) const = default;

  // Estimated seconds of `flops` of computation and `collectives` collectives moving `bytes`.
  double Seconds(int64_t flops, int64_t bytes, int64_t collectives) const {
    return static_cast<double>(flops) / flops_per_second +
           static_cast<double>(bytes) / bytes_per_second +
           static_cast<double>(collectives) * seconds_per_collective;
  }
};

}  // namespace shardjit::passes

#endif  // SHARDJIT_PASSES_MACHINE_MODEL_H_
