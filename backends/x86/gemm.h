// GEMM for the x86 backend: C[m,n] = (accumulate ? C : 0) + A[m,k] * B[k,n] with f32
// accumulation, or for int8 operands exact s32 accumulation (wrapping modulo 2^32). A and B are
// read through arbitrary element strides, so transposed or batched operands need no materialised
// copy. Dispatch picks the best kernel for ActiveIsa() and falls back
// level by level down to plain C++.
#ifndef SHARDJIT_BACKENDS_X86_GEMM_H_
#define SHARDJIT_BACKENDS_X86_GEMM_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "backends/x86/cpu_features.h"
#include "base/thread_pool.h"
#include "ir/allocator.h"

namespace shardjit::backends::x86 {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

// Input element types -> accumulation and C: f32 for bf16 and f32 operands; kF64F64F64 sums f64
// operands into an f64 C; kS8S8S32 multiplies int8 operands into an int32 C (products exact, sums
// wrapping modulo 2^32, as integer dots do).
enum class GemmType { kBf16Bf16F32, kF32F32F32, kS8S8S32, kF64F64F64 };

// Bytes per element of A and B.
inline int GemmInputBytes(GemmType type) {
  switch (type) {
    case GemmType::kF64F64F64:
      return 8;
    case GemmType::kF32F32F32:
      return 4;
    case GemmType::kBf16Bf16F32:
      return 2;
    case GemmType::kS8S8S32:
      return 1;
  }
  return 0;
}

// Packed blocks of operands that do not change between products (a user kernel's blocks read in
// place from its inputs), kept so that later products reading the same block of the same memory
// skip packing it. One thread at a time; Gemm consults it only for products it runs on one
// thread, for the operands marked cacheable, in the floating-point layouts.
//
// Blocks take at most `max_bytes` between products: each product starts by dropping the blocks
// used least recently past that (a block a product was given stays valid until the product
// ends), and a dropped block's memory serves the next block of its size, still in cache (a
// kernel's grid packs blocks of a few sizes over and over). Memory comes in chunks from
// `allocator`; a device's allocator keeps freed chunks for its next run, so that run after run
// no fresh pages are faulted in.
class GemmPackCache {
 public:
  explicit GemmPackCache(ir::Allocator* allocator = ir::HostAllocator(),
                         int64_t max_bytes = int64_t{256} << 20);
  ~GemmPackCache();
  GemmPackCache(const GemmPackCache&) = delete;
  GemmPackCache& operator=(const GemmPackCache&) = delete;

  struct Key {
    const void* src;
    int64_t row_stride, col_stride, r0, rows, k0, kc;
    int layout, tile;
    bool b;
    bool operator==(const Key& o) const;
  };
  // Called by Gemm before each product: drops the least recently used blocks past max_bytes.
  void StartProduct();
  // The block packed under `key` (`bytes` long), packed by pack(dst) on a miss; null when no
  // memory is left for it (the caller packs into its own buffer).
  const void* Get(const Key& key, int64_t bytes, const std::function<void(void*)>& pack);
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  // Bytes of blocks kept now.
  int64_t kept_bytes() const { return kept_bytes_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ir::Allocator* allocator_;
  int64_t max_bytes_, kept_bytes_ = 0, hits_ = 0, misses_ = 0;
};

struct GemmArgs {
  GemmShape shape;
  GemmType type = GemmType::kF32F32F32;
  // A[i,l] is a[i * a_row_stride + l * a_col_stride] (f32, ir::bf16 or int8 per `type`). A row
  // stride of 0 means dense row-major (k).
  const void* a = nullptr;
  int64_t a_row_stride = 0;
  int64_t a_col_stride = 1;
  // B[l,j] is b[l * b_row_stride + j * b_col_stride]. A row stride of 0 means dense (n).
  const void* b = nullptr;
  int64_t b_row_stride = 0;
  int64_t b_col_stride = 1;
  // C[i,j] is c[i * ldc + j]: f32, or bf16 when out_bf16 (rounded once, to nearest even, from the
  // f32 sum); int32 for kS8S8S32 and f64 for kF64F64F64 (out_bf16 must be false). ldc 0 means n.
  void* c = nullptr;
  int64_t ldc = 0;
  bool out_bf16 = false;
  // Adds to the existing C instead of overwriting it.
  bool accumulate = false;
  // The depth blocks depend on k alone (not on the rows or columns a product or a thread's part
  // of it has): products of the same k then sum each element in the same order however their
  // rows and columns are split (a pallas_call grid run on one thread or several gives the same
  // bits). Without it a product of few rows may take shallower blocks (StreamingPlan).
  bool fixed_depth_blocks = false;
  // The threads this call may split its work over (panels of M or N): by default the calling
  // thread alone; kernels of a running program pass base::CurrentParallelism(), whose stop
  // signal the GEMM polls between blocks (returning its error, C unspecified).
  base::Parallelism parallel;
  // Where packed blocks of A (cache_a) and B (cache_b) are kept across products: only for
  // operands whose memory does not change while the cache lives.
  GemmPackCache* pack_cache = nullptr;
  bool cache_a = false;
  bool cache_b = false;
};

// Computes the product described by `args`. InvalidArgument for bad shapes, strides or pointers.
absl::Status Gemm(const GemmArgs& args);

// Runs only the implementation of level `isa` (no fallback); FailedPrecondition if this CPU lacks
// it or it has no kernel for `args`. For tests and benchmarks.
absl::Status GemmAtIsa(const GemmArgs& args, IsaLevel isa);

// The level Gemm would use for `args` now (ignoring code generation failures): ActiveIsa(),
// except that AMX serves only bf16 products, and AVX512_BF16 only bf16 products on CPUs where
// vdpbf16ps beats f32 FMAs (Bf16DotProductBeatsFma(); elsewhere bf16 is widened in packing for
// the f32 kernel); int8 products run at kAvx512 where Avx512VnniUsable(), else, from AVX2 on,
// widened into the float GEMM (the level a bf16 product gets; exact, in depth blocks whose f32
// sums stay below 2^24), else in plain C++.
IsaLevel GemmIsaFor(const GemmArgs& args);

// Whether Gemm runs int8 products on generated code now (the VNNI kernels, or widened into the
// float GEMM) rather than in plain C++.
bool GemmRunsInt8();

// Statistics of the process-wide cache of generated micro-kernels.
struct KernelCacheStats {
  int64_t kernels = 0;        // kernels generated so far
  int64_t generation_ns = 0;  // total time spent generating them
  int64_t code_bytes = 0;     // total size of their code
};
KernelCacheStats GetKernelCacheStats();

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_GEMM_H_
