// This host's rates as the partitioner's machine model needs them (passes/machine_model.h),
// measured once per process: how fast one thread multiplies bf16 matrices at the ISA level Gemm
// uses, and how fast it copies a block between buffers, as collectives do.
#ifndef SHARDJIT_BACKENDS_X86_HOST_RATES_H_
#define SHARDJIT_BACKENDS_X86_HOST_RATES_H_

namespace shardjit::backends::x86 {

struct HostRates {
  double gemm_flops_per_second = 0;
  double copy_bytes_per_second = 0;
};

// The best of a few runs of a 256x256x256 bf16 GEMM and of a 4 MiB copy, on the calling thread,
// on first use (about a millisecond); the same figures afterwards.
const HostRates& MeasuredHostRates();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_HOST_RATES_H_
