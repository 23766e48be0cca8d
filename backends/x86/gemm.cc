// Gemm: validation, the dispatch list (best level first, ending in plain C++) and the split of
// one call over threads.
#include "backends/x86/gemm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "backends/x86/gemm_driver.h"
#include "backends/x86/gemm_f64.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/gemm_reference.h"
#include "backends/x86/kernel_cache.h"
#include "backends/x86/peak_loop.h"
#include "backends/x86/zero_fill.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

std::string Describe(const GemmArgs& g) {
  const char* in = "f32";
  const char* out = g.out_bf16 ? " -> bf16" : " -> f32";
  switch (g.type) {
    case GemmType::kS8S8S32:
      in = "s8", out = " -> s32";
      break;
    case GemmType::kF64F64F64:
      in = "f64", out = " -> f64";
      break;
    case GemmType::kBf16Bf16F32:
      in = "bf16";
      break;
    case GemmType::kF32F32F32:
      break;
  }
  return fmt::format("(m={}, n={}, k={}, {}{})", g.shape.m, g.shape.n, g.shape.k, in, out);
}

// Checks `args` and resolves the defaulted strides.
absl::Status Normalize(const GemmArgs& args, GemmArgs* g) {
  *g = args;
  const GemmShape& s = g->shape;
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(fmt::format("gemm: {} {}", what, Describe(args)));
  };
  if (s.m < 0 || s.n < 0 || s.k < 0) return error("negative dimension");
  if ((g->type == GemmType::kS8S8S32 || g->type == GemmType::kF64F64F64) && g->out_bf16) {
    return error("bf16 C for a product that is not f32");
  }
  if (g->parallel.threads < 1) {
    return error(fmt::format("parallel.threads {} < 1", g->parallel.threads));
  }
  if (g->a_row_stride == 0) g->a_row_stride = s.k;
  if (g->b_row_stride == 0) g->b_row_stride = s.n;
  if (g->ldc == 0) g->ldc = s.n;
  if (g->a_row_stride < 0 || g->a_col_stride < 0 || g->b_row_stride < 0 || g->b_col_stride < 0) {
    return error("negative stride");
  }
  if (s.m > 1 && g->ldc < s.n) return error(fmt::format("ldc {} < n", g->ldc));
  if (s.m > 0 && s.n > 0 && g->c == nullptr) return error("null C");
  if (s.m > 0 && s.n > 0 && s.k > 0 && (g->a == nullptr || g->b == nullptr)) {
    return error("null A or B");
  }
  return absl::OkStatus();
}

size_t InBytes(const GemmArgs& g) { return GemmInputBytes(g.type); }
size_t OutBytes(const GemmArgs& g) {
  return g.type == GemmType::kF64F64F64 ? 8 : g.out_bf16 ? 2 : 4;
}

const void* Offset(const void* p, int64_t elements, size_t bytes) {
  return static_cast<const char*>(p) + elements * static_cast<int64_t>(bytes);
}

// Splits `g` into independent sub-products, over N in whole panels of nr columns or over M in
// strips of mr rows. Every thread packs all of the operand that is not split, so the split goes
// where that costs less (N when A is the smaller operand), given enough panels to share.
std::vector<GemmArgs> Partition(const GemmArgs& g, int mr, int nr, int64_t min_flops_per_thread) {
  const int64_t flops = 2 * g.shape.m * g.shape.n * g.shape.k;
  const int64_t threads = std::min<int64_t>(
      g.parallel.available(),
      std::max<int64_t>(1, flops / std::max<int64_t>(1, min_flops_per_thread)));
  const int64_t n_panels = (g.shape.n + nr - 1) / nr, m_panels = (g.shape.m + mr - 1) / mr;
  const bool split_n = n_panels >= 2 * threads &&
                       (m_panels < 2 * threads || g.shape.m <= g.shape.n);
  const int64_t panels = split_n ? n_panels : m_panels;
  const int64_t parts = std::min(threads, panels);
  if (parts <= 1) return {g};
  std::vector<GemmArgs> out;
  int64_t begin = 0;
  for (int64_t t = 0; t < parts; ++t) {
    const int64_t count = panels / parts + (t < panels % parts ? 1 : 0);
    GemmArgs sub = g;
    sub.parallel = {.stop = g.parallel.stop};
    if (split_n) {
      const int64_t n0 = begin * nr, n1 = std::min(g.shape.n, (begin + count) * nr);
      sub.shape.n = n1 - n0;
      sub.b = Offset(g.b, n0 * g.b_col_stride, InBytes(g));
      sub.c = const_cast<void*>(Offset(g.c, n0, OutBytes(g)));
    } else {
      const int64_t m0 = begin * mr, m1 = std::min(g.shape.m, (begin + count) * mr);
      sub.shape.m = m1 - m0;
      sub.a = Offset(g.a, m0 * g.a_row_stride, InBytes(g));
      sub.c = const_cast<void*>(Offset(g.c, m0 * g.ldc, OutBytes(g)));
    }
    out.push_back(sub);
    begin += count;
  }
  return out;
}

// C = accumulate ? C : 0 when there is nothing to add.
void ZeroOrKeep(const GemmArgs& g) {
  if (g.accumulate) return;
  ZeroRows(g.c, g.shape.m, g.shape.n * OutBytes(g), g.ldc * OutBytes(g));
}

// Why level `isa` has no int8 kernel for this CPU or plan; OK when it has one.
absl::Status Int8KernelAt(IsaLevel isa, const GemmPlan* plan_override) {
  if (isa < IsaLevel::kAvx512) {
    return absl::UnimplementedError(
        fmt::format("gemm: no int8 kernel at {} (AVX512_VNNI only)", IsaName(isa)));
  }
  const bool portable = plan_override != nullptr && plan_override->portable_kernels;
  if (!portable && !DetectedAvx512Vnni()) {
    return absl::UnimplementedError("gemm: int8 products need AVX512_VNNI, which this CPU lacks");
  }
  return absl::OkStatus();
}

// Runs `work(part, scratch)` for every part over the threads of `parallel`.
template <typename Work>
absl::Status RunParts(const std::vector<GemmArgs>& parts, const base::Parallelism& parallel,
                      Work work) {
  std::vector<absl::Status> status(parts.size());
  parallel.ParallelFor(static_cast<int>(parts.size()), [&](int t) {
    // Packing buffers live with the thread that runs the part and are reused across calls.
    thread_local GemmScratch scratch;
    status[t] = work(parts[t], &scratch);
    scratch.Trim();
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Runs normalized, non-trivial `g` at level `isa`.
absl::Status RunAt(const GemmArgs& g, IsaLevel isa, const GemmPlan* plan_override) {
  if (isa == IsaLevel::kReference && plan_override == nullptr) {
    const int64_t min_flops = GemmPlan().min_flops_per_thread;
    return RunParts(Partition(g, 1, 1 << 30, min_flops), g.parallel,
                    [](const GemmArgs& part, GemmScratch*) {
      return GemmReference(part);
    });
  }
  if (g.type == GemmType::kF64F64F64) {
    if (isa < IsaLevel::kAvx2) return absl::UnimplementedError("gemm: f64 kernels need AVX2");
    const int64_t min_flops = GemmPlan().min_flops_per_thread;
    const F64Tile tile = F64TileAt(isa);
    return RunParts(Partition(g, tile.rows, tile.cols, min_flops), g.parallel,
                    [isa](const GemmArgs& part, GemmScratch* scratch) {
                      return GemmF64(part, isa, scratch);
                    });
  }
  if (g.type == GemmType::kS8S8S32) RETURN_IF_ERROR(Int8KernelAt(isa, plan_override));
  const GemmPlan plan = plan_override ? *plan_override : MakePlan(isa, g.type, HostCaches());
  RETURN_IF_ERROR(ValidatePlan(plan));
  std::vector<GemmArgs> parts = Partition(g, plan.mr, plan.nr, plan.min_flops_per_thread);
  std::vector<KernelSet> kernels(parts.size());
  for (size_t t = 0; t < parts.size(); ++t) {
    RETURN_IF_ERROR(kernels[t].Prepare(plan, parts[t]));
  }
  const GemmArgs* base = parts.data();
  return RunParts(parts, g.parallel, [&](const GemmArgs& part, GemmScratch* scratch) {
    return RunBlocked(part, kernels[&part - base], scratch);
  });
}

// Normalizes and handles the empty cases; *done is true when nothing is left to run.
absl::Status Prepare(const GemmArgs& args, GemmArgs* g, bool* done) {
  RETURN_IF_ERROR(Normalize(args, g));
  // The pack cache serves one thread at a time.
  if (g->parallel.available() > 1) g->pack_cache = nullptr;
  *done = g->shape.m == 0 || g->shape.n == 0 || g->shape.k == 0;
  if (*done && g->shape.m > 0 && g->shape.n > 0) ZeroOrKeep(*g);
  return absl::OkStatus();
}

// Generation failures fall back to the next level; anything else is final.
bool MayFallBack(const absl::Status& s) { return absl::IsInternal(s) || absl::IsUnimplemented(s); }

// Depth of the float products an int8 product is cut into when widened: sums of this many
// products of int8 values (each at most 2^14 in magnitude) stay within 2^24, where f32 holds
// every integer exactly.
constexpr int64_t kWidenedDepth = 1024;

// Whether int8 products run widened into the float GEMM (GemmS8Widened): the CPU lacks
// AVX512_VNNI (or the cap hides it) but has generated float kernels.
bool WidensS8(const GemmArgs& g) {
  return g.type == GemmType::kS8S8S32 && !Avx512VnniUsable() && ActiveIsa() >= IsaLevel::kAvx2;
}

// The int8 product `g` (normalized, non-empty) without int8 kernels: A and B widened to bf16
// (exact for int8) and multiplied by the float GEMM in depth blocks of kWidenedDepth, each
// block's f32 sums exact, added into C as int32 with the integer dot's wrap-around.
absl::Status GemmS8Widened(const GemmArgs& g) {
  const int64_t m = g.shape.m, n = g.shape.n, k = g.shape.k;
  std::unique_ptr<uint16_t[]> a(new (std::nothrow) uint16_t[m * k]);
  std::unique_ptr<uint16_t[]> b(new (std::nothrow) uint16_t[k * n]);
  std::unique_ptr<float[]> block(new (std::nothrow) float[m * n]);
  if (a == nullptr || b == nullptr || block == nullptr) {
    return absl::ResourceExhaustedError(
        fmt::format("gemm: cannot allocate the widened operands of {}", Describe(g)));
  }
  // An int8 value is an integer of at most 8 bits: exact in bf16 (and f32).
  auto widen = [](int8_t x) { return ir::bf16::FromFloat(static_cast<float>(x)); };
  const auto* a8 = static_cast<const int8_t*>(g.a);
  const auto* b8 = static_cast<const int8_t*>(g.b);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t l = 0; l < k; ++l) {
      a[i * k + l] = widen(a8[i * g.a_row_stride + l * g.a_col_stride]);
    }
  }
  for (int64_t l = 0; l < k; ++l) {
    for (int64_t j = 0; j < n; ++j) {
      b[l * n + j] = widen(b8[l * g.b_row_stride + j * g.b_col_stride]);
    }
  }
  auto* c = static_cast<uint32_t*>(g.c);
  for (int64_t k0 = 0; k0 < k; k0 += kWidenedDepth) {
    GemmArgs f;
    f.shape = {m, n, std::min(kWidenedDepth, k - k0)};
    f.type = GemmType::kBf16Bf16F32;
    f.a = a.get() + k0;
    f.a_row_stride = k;
    f.b = b.get() + k0 * n;
    f.b_row_stride = n;
    f.c = block.get();
    f.ldc = n;
    f.parallel = g.parallel;
    RETURN_IF_ERROR(Gemm(f));
    const bool add = k0 > 0 || g.accumulate;
    for (int64_t i = 0; i < m; ++i) {
      uint32_t* row = c + i * g.ldc;
      for (int64_t j = 0; j < n; ++j) {
        const auto sum = static_cast<uint32_t>(static_cast<int32_t>(block[i * n + j]));
        row[j] = add ? row[j] + sum : sum;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

IsaLevel GemmIsaFor(const GemmArgs& args) {
  if (args.type == GemmType::kS8S8S32) {
    if (Avx512VnniUsable()) return IsaLevel::kAvx512;
    if (!WidensS8(args)) return IsaLevel::kReference;
    GemmArgs widened = args;  // the float GEMM's level
    widened.type = GemmType::kBf16Bf16F32;
    return GemmIsaFor(widened);
  }
  IsaLevel isa = ActiveIsa();
  // f64 runs on the AVX2 kernel, or the AVX-512 one.
  if (args.type == GemmType::kF64F64F64) return std::min(isa, IsaLevel::kAvx512);
  const bool bf16 = args.type == GemmType::kBf16Bf16F32;
  // AMX tiles for bf16 products (each tdpbf16ps does 16x16x32 multiply-adds).
  if (isa >= IsaLevel::kAmxBf16) return bf16 ? IsaLevel::kAmxBf16 : IsaLevel::kAvx512;
  // vdpbf16ps only for bf16, and only where it beats f32 FMAs on widened bf16 (on some CPUs it
  // has half their throughput, so twice the flops per instruction buys nothing).
  if (isa == IsaLevel::kAvx512Bf16 &&
      (args.type != GemmType::kBf16Bf16F32 || !Bf16DotProductBeatsFma())) {
    return IsaLevel::kAvx512;
  }
  return isa;
}

bool GemmRunsInt8() {
  GemmArgs g;
  g.type = GemmType::kS8S8S32;
  return GemmIsaFor(g) != IsaLevel::kReference;
}

absl::Status Gemm(const GemmArgs& args) {
  GemmArgs g;
  bool done = false;
  if (absl::Status s = Prepare(args, &g, &done); !s.ok() || done) return s;
  if (WidensS8(g)) return GemmS8Widened(g);
  for (int level = static_cast<int>(GemmIsaFor(g)); level >= 0; --level) {
    absl::Status s = RunAt(g, static_cast<IsaLevel>(level), nullptr);
    if (s.ok() || !MayFallBack(s) || level == 0) return s;
  }
  return absl::OkStatus();
}

absl::Status GemmAtIsa(const GemmArgs& args, IsaLevel isa) {
  if (isa > DetectedIsa()) {
    return absl::FailedPreconditionError(
        fmt::format("gemm: this CPU lacks {} (has {})", IsaName(isa), IsaName(DetectedIsa())));
  }
  return internal::GemmWithPlan(args, isa, nullptr);
}

KernelCacheStats GetKernelCacheStats() { return KernelCache::Global().stats(); }

namespace internal {

absl::Status GemmWithPlan(const GemmArgs& args, IsaLevel isa, const GemmPlan* plan) {
  GemmArgs g;
  bool done = false;
  if (absl::Status s = Prepare(args, &g, &done); !s.ok() || done) return s;
  return RunAt(g, isa, plan);
}

}  // namespace internal
}  // namespace shardjit::backends::x86
