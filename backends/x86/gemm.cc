// Gemm: validation, the dispatch list (best level first, ending in plain C++) and the split of
// one call over threads.
#include "backends/x86/gemm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "backends/x86/gemm_driver.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/gemm_reference.h"
#include "backends/x86/kernel_cache.h"
#include "backends/x86/peak_loop.h"
#include "backends/x86/zero_fill.h"
#include "base/status_macros.h"
#include "fmt/format.h"

namespace shardjit::backends::x86 {
namespace {

std::string Describe(const GemmArgs& g) {
  const bool s8 = g.type == GemmType::kS8S8S32;
  return fmt::format("(m={}, n={}, k={}, {}{})", g.shape.m, g.shape.n, g.shape.k,
                     s8 ? "s8" : g.type == GemmType::kBf16Bf16F32 ? "bf16" : "f32",
                     s8 ? " -> s32" : g.out_bf16 ? " -> bf16" : " -> f32");
}

// Checks `args` and resolves the defaulted strides.
absl::Status Normalize(const GemmArgs& args, GemmArgs* g) {
  *g = args;
  const GemmShape& s = g->shape;
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(fmt::format("gemm: {} {}", what, Describe(args)));
  };
  if (s.m < 0 || s.n < 0 || s.k < 0) return error("negative dimension");
  if (g->type == GemmType::kS8S8S32 && g->out_bf16) return error("int8 product with bf16 C");
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
size_t OutBytes(const GemmArgs& g) { return g.out_bf16 ? 2 : 4; }

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

}  // namespace

IsaLevel GemmIsaFor(const GemmArgs& args) {
  if (args.type == GemmType::kS8S8S32) {
    return Avx512VnniUsable() ? IsaLevel::kAvx512 : IsaLevel::kReference;
  }
  IsaLevel isa = ActiveIsa();
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

absl::Status Gemm(const GemmArgs& args) {
  GemmArgs g;
  bool done = false;
  if (absl::Status s = Prepare(args, &g, &done); !s.ok() || done) return s;
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
