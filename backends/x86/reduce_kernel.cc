#include "backends/x86/reduce_kernel.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "backends/executable.h"
#include "fmt/format.h"

namespace shardjit::backends::x86 {
namespace {

using Xbyak::Xmm;
using Xbyak::Ymm;

constexpr int kLanes = 8;

template <typename T>
const T* Row(const ReduceArgs* a, int64_t r) {
  return reinterpret_cast<const T*>(static_cast<const char*>(a->src) + r * a->row_stride);
}

template <ReduceKind kKind, typename T>
void PortableRows(const ReduceArgs* a) {
  const int64_t n = a->vectors * kLanes;
  for (int64_t r = 0; r < a->rows; ++r) {
    const T* row = Row<T>(a, r);
    float acc = a->acc[r];
    for (int64_t i = 0; i < n; ++i) acc = CombineInOrder<kKind>(acc, static_cast<float>(row[i]));
    a->acc[r] = acc;
  }
}

template <ReduceKind kKind, typename T>
void PortableColumns(const ReduceArgs* a) {
  const int64_t n = a->vectors * kLanes;
  for (int64_t r = 0; r < a->rows; ++r) {
    const T* row = Row<T>(a, r);
    for (int64_t j = 0; j < n; ++j) {
      a->acc[j] = CombineInOrder<kKind>(a->acc[j], static_cast<float>(row[j]));
    }
  }
}

template <ReduceKind kKind, typename T>
ReduceLoopFn PortableLoop(ReduceLayout layout) {
  return layout == ReduceLayout::kRows ? &PortableRows<kKind, T> : &PortableColumns<kKind, T>;
}

template <ReduceKind kKind>
ReduceLoopFn PortableLoop(const ReduceLoopKey& key) {
  return key.dtype == ir::DType::kBF16 ? PortableLoop<kKind, ir::bf16>(key.layout)
                                       : PortableLoop<kKind, float>(key.layout);
}

ReduceLoopFn PortableLoop(const ReduceLoopKey& key) {
  switch (key.kind) {
    case ReduceKind::kSum:
      return PortableLoop<ReduceKind::kSum>(key);
    case ReduceKind::kMax:
      return PortableLoop<ReduceKind::kMax>(key);
    case ReduceKind::kMin:
      return PortableLoop<ReduceKind::kMin>(key);
  }
  return nullptr;
}

// Generated loops by key name; failures are cached too.
class ReduceLoopCache {
 public:
  static ReduceLoopCache& Global() {
    static ReduceLoopCache* cache = new ReduceLoopCache();
    return *cache;
  }

  absl::StatusOr<ReduceLoopFn> Get(const ReduceLoopKey& key) {
    const std::string name = key.Name();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      const int64_t start_ns = base::SpanClockNs();
      Entry entry;
      auto generator = std::make_unique<ReduceKernelAvx2>(key);
      entry.status = generator->Create();
      if (entry.status.ok()) entry.generator = std::move(generator);
      if (base::SpanRecorder* recorder = base::ThreadSpanRecorder(); recorder != nullptr) {
        recorder->Record({name, "compile", start_ns, base::SpanClockNs() - start_ns, {}});
      }
      it = entries_.emplace(name, std::move(entry)).first;
    }
    if (!it->second.status.ok()) return it->second.status;
    return reinterpret_cast<ReduceLoopFn>(const_cast<void*>(it->second.generator->code()));
  }

 private:
  struct Entry {
    std::unique_ptr<ReduceKernelAvx2> generator;  // null when generation failed
    absl::Status status;
  };
  std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string ReduceLoopKey::Name() const {
  const char* op = kind == ReduceKind::kSum ? "sum" : kind == ReduceKind::kMax ? "max" : "min";
  return fmt::format("reduce_avx2_{}_{}_{}", op, ir::DTypeName(dtype),
                     layout == ReduceLayout::kRows ? "rows" : "columns");
}

ReduceKernelAvx2::ReduceKernelAvx2(const ReduceLoopKey& key)
    : JitGenerator(key.Name()), key_(key) {}

void ReduceKernelAvx2::GenerateBody() {
  mov(reg_src, ptr[reg_args + offsetof(ReduceArgs, src)]);
  mov(reg_stride, ptr[reg_args + offsetof(ReduceArgs, row_stride)]);
  mov(reg_rows, ptr[reg_args + offsetof(ReduceArgs, rows)]);
  mov(reg_n, ptr[reg_args + offsetof(ReduceArgs, vectors)]);
  shl(reg_n, 3);
  mov(reg_acc, ptr[reg_args + offsetof(ReduceArgs, acc)]);
  mov(eax, std::bit_cast<uint32_t>(ReduceIdentity<float>(key_.kind)));
  vmovd(Xmm(identity_vec_.getIdx()), eax);
  vbroadcastss(identity_vec_, Xmm(identity_vec_.getIdx()));
  if (key_.layout == ReduceLayout::kRows) {
    EmitRows();
  } else {
    EmitColumns();
  }
}

void ReduceKernelAvx2::EmitLoad(const Ymm& dst, const Xbyak::Address& addr) {
  if (key_.dtype == ir::DType::kBF16) {
    vpmovzxwd(dst, addr);
    vpslld(dst, dst, 16);
  } else {
    vmovups(dst, addr);
  }
}

template <typename V>
void ReduceKernelAvx2::EmitCombine(const V& acc, const V& x) {
  const V t0(tmp0_.getIdx()), t1(tmp1_.getIdx());
  switch (key_.kind) {
    case ReduceKind::kSum:
      vaddps(acc, acc, x);
      return;
    case ReduceKind::kMax:
      vmaxps(t0, x, acc);  // x > acc ? x : acc; acc when either is NaN
      break;
    case ReduceKind::kMin:
      vminps(t0, x, acc);  // x < acc ? x : acc; acc when either is NaN
      break;
  }
  vcmpunordps(t1, x, x);
  vblendvps(acc, t0, x, t1);  // a NaN x wins
}

void ReduceKernelAvx2::EmitRows() {
  const int es = ElementBytes();
  const Xbyak::Reg64 reg_main_end = rax;  // the last j that starts a full main-loop step
  Xbyak::Label row_loop, main_loop, single_loop, horizontal;
  mov(reg_main_end, reg_n);
  sub(reg_main_end, kAccumulators * kLanes);
  L(row_loop);
  for (int k = 0; k < kAccumulators; ++k) vmovaps(Ymm(k), identity_vec_);
  xor_(reg_j, reg_j);
  L(main_loop);
  cmp(reg_j, reg_main_end);
  jg(single_loop, T_NEAR);
  for (int k = 0; k < kAccumulators; ++k) {
    EmitLoad(x_, ptr[reg_src + reg_j * es + k * kLanes * es]);
    EmitCombine(Ymm(k), x_);
  }
  add(reg_j, kAccumulators * kLanes);
  jmp(main_loop, T_NEAR);
  L(single_loop);
  cmp(reg_j, reg_n);
  jge(horizontal, T_NEAR);
  EmitLoad(x_, ptr[reg_src + reg_j * es]);
  EmitCombine(Ymm(0), x_);
  add(reg_j, kLanes);
  jmp(single_loop, T_NEAR);
  L(horizontal);
  EmitCombine(Ymm(0), Ymm(1));
  EmitCombine(Ymm(2), Ymm(3));
  EmitCombine(Ymm(0), Ymm(2));
  vextractf128(Xmm(1), Ymm(0), 1);
  EmitCombine(Xmm(0), Xmm(1));
  vmovhlps(Xmm(1), Xmm(1), Xmm(0));  // lanes 2, 3 -> 0, 1
  EmitCombine(Xmm(0), Xmm(1));
  vmovshdup(Xmm(1), Xmm(0));  // lane 1 -> 0
  EmitCombine(Xmm(0), Xmm(1));
  vmovss(Xmm(1), ptr[reg_acc]);
  EmitCombine(Xmm(1), Xmm(0));
  vmovss(ptr[reg_acc], Xmm(1));
  add(reg_acc, 4);
  add(reg_src, reg_stride);
  dec(reg_rows);
  jnz(row_loop, T_NEAR);
}

void ReduceKernelAvx2::EmitColumnLoop(std::initializer_list<Xbyak::Reg64> rows) {
  const int es = ElementBytes();
  Xbyak::Label col_loop;
  xor_(reg_j, reg_j);
  L(col_loop);
  vmovups(Ymm(0), ptr[reg_acc + reg_j * 4]);
  for (const Xbyak::Reg64& row : rows) {
    EmitLoad(x_, ptr[row + reg_j * es]);
    EmitCombine(Ymm(0), x_);
  }
  vmovups(ptr[reg_acc + reg_j * 4], Ymm(0));
  add(reg_j, kLanes);
  cmp(reg_j, reg_n);
  jl(col_loop, T_NEAR);
}

void ReduceKernelAvx2::EmitColumns() {
  Xbyak::Label group_loop, single_rows, row_loop, done;
  // Four rows at a time: each accumulator vector is loaded and stored once per four rows.
  L(group_loop);
  cmp(reg_rows, 4);
  jl(single_rows, T_NEAR);
  lea(reg_row1, ptr[reg_src + reg_stride]);
  lea(reg_row2, ptr[reg_row1 + reg_stride]);
  lea(reg_row3, ptr[reg_row2 + reg_stride]);
  EmitColumnLoop({reg_src, reg_row1, reg_row2, reg_row3});
  lea(reg_src, ptr[reg_row3 + reg_stride]);
  sub(reg_rows, 4);
  jmp(group_loop, T_NEAR);
  // The last rows one at a time.
  L(single_rows);
  test(reg_rows, reg_rows);
  jz(done, T_NEAR);
  L(row_loop);
  EmitColumnLoop({reg_src});
  add(reg_src, reg_stride);
  dec(reg_rows);
  jnz(row_loop, T_NEAR);
  L(done);
}

absl::StatusOr<ReduceLoopFn> GetReduceLoop(const ReduceLoopKey& key, IsaLevel isa) {
  if (key.dtype != ir::DType::kF32 && key.dtype != ir::DType::kBF16) {
    return absl::InvalidArgumentError(
        fmt::format("{}: input dtype must be f32 or bf16", key.Name()));
  }
  if (isa < IsaLevel::kAvx2) return PortableLoop(key);
  return ReduceLoopCache::Global().Get(key);
}

}  // namespace shardjit::backends::x86
