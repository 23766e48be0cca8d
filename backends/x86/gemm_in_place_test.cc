// B read in place (gemm_driver.h, ReadsBInPlace): products of few rows whose micro-kernels take
// B's full panels straight from the row-major matrix (f32, or bf16 widened as it is loaded). Which products do, their blocks, the
// generated kernels against the portable one (bit for bit, reading nothing past B), and whole
// products against the f64 oracle at every level.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/x86/cpu_features.h"
#include "backends/x86/gemm_driver.h"
#include "backends/x86/gemm_internal.h"
#include "backends/x86/gemm_kernel.h"
#include "backends/x86/gemm_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "backends/x86/kernel_cache.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

using gemm_test::Case;
using gemm_test::Problem;

GemmArgs FewRows(int64_t m, int64_t n) {
  GemmArgs args;
  args.type = GemmType::kF32F32F32;
  args.shape = {m, n, 300};
  args.b_row_stride = n;
  args.b_col_stride = 1;
  return args;
}

// CPUs whose plans differ: up to 15 f32 rows in place on the Xeon, 31 on Zen 5.
const CpuIdentity kIceLakeXeon{"GenuineIntel", 6, 106};
const CpuIdentity kZen5{"AuthenticAMD", 26, 2};

TEST(ReadsBInPlace, FewRowsOfF32BContiguousAlongN) {
  const GemmPlan zmm = MakePlan(IsaLevel::kAvx512, GemmType::kF32F32F32, CacheSizes{},
                                kIceLakeXeon);
  const GemmPlan ymm = MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{});
  EXPECT_EQ(zmm.max_rows_b_in_place, 15);
  const GemmPlan zen5 = MakePlan(IsaLevel::kAvx512, GemmType::kF32F32F32, CacheSizes{}, kZen5);
  EXPECT_EQ(zen5.max_rows_b_in_place, 31);
  EXPECT_TRUE(ReadsBInPlace(zen5, FewRows(16, 1000)));
  EXPECT_FALSE(ReadsBInPlace(zen5, FewRows(32, 1000)));
  EXPECT_FALSE(ReadsBInPlace(zen5, FewRows(20, 15)));  // panels of 16
  EXPECT_EQ(MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{}, kZen5)
                .max_rows_b_in_place,
            6);
  EXPECT_EQ(MakePlan(IsaLevel::kAvx512, GemmType::kBf16Bf16F32, CacheSizes{}, kZen5)
                .max_rows_b_in_place,
            7);
  EXPECT_EQ(ymm.max_rows_b_in_place, 6);
  EXPECT_TRUE(ReadsBInPlace(zmm, FewRows(1, 64)));
  EXPECT_TRUE(ReadsBInPlace(zmm, FewRows(15, 1000)));
  EXPECT_FALSE(ReadsBInPlace(zmm, FewRows(16, 1000)));
  EXPECT_TRUE(ReadsBInPlace(ymm, FewRows(6, 16)));
  EXPECT_FALSE(ReadsBInPlace(ymm, FewRows(7, 1000)));
  EXPECT_FALSE(ReadsBInPlace(zmm, FewRows(3, 63)));  // not one full panel: all packed
  EXPECT_FALSE(ReadsBInPlace(ymm, FewRows(1, 55)));  // its panels are 56 wide
  // In place, B is not also streamed.
  EXPECT_FALSE(StreamsB(zmm, FewRows(3, 5000)));
  EXPECT_TRUE(StreamsB(zmm, FewRows(16, 5000)));
  GemmArgs transposed_b = FewRows(3, 1000);
  transposed_b.b_row_stride = 1;
  transposed_b.b_col_stride = 300;
  EXPECT_FALSE(ReadsBInPlace(zmm, transposed_b));
  GemmArgs padded_rows = FewRows(3, 1000);
  padded_rows.b_row_stride = 1017;
  EXPECT_TRUE(ReadsBInPlace(zmm, padded_rows));
  GemmArgs bf16 = FewRows(3, 1000);  // widened as it is loaded, into f32 panels
  bf16.type = GemmType::kBf16Bf16F32;
  EXPECT_TRUE(ReadsBInPlace(zmm, bf16));
  const GemmPlan zmm_bf16 =
      MakePlan(IsaLevel::kAvx512, GemmType::kBf16Bf16F32, CacheSizes{}, kIceLakeXeon);
  EXPECT_EQ(zmm_bf16.max_rows_b_in_place, 7);  // panels of 4 zmm: 128-byte runs of bf16
  EXPECT_EQ(MakePlan(IsaLevel::kAvx2, GemmType::kBf16Bf16F32, CacheSizes{}).max_rows_b_in_place,
            6);
  GemmArgs int8 = FewRows(3, 1000);
  int8.type = GemmType::kS8S8S32;
  EXPECT_FALSE(ReadsBInPlace(zmm, int8));
  GemmPackCache cache;
  GemmArgs cached = FewRows(3, 1000);  // packed once, read from the cache after
  cached.pack_cache = &cache;
  cached.cache_b = true;
  EXPECT_FALSE(ReadsBInPlace(zmm, cached));
  cached.cache_b = false;
  EXPECT_TRUE(ReadsBInPlace(zmm, cached));
  GemmPlan off = zmm;
  off.max_rows_b_in_place = 0;
  EXPECT_FALSE(ReadsBInPlace(off, FewRows(1, 1000)));
  const GemmPlan pairs = MakePlan(IsaLevel::kAvx512Bf16, GemmType::kBf16Bf16F32, CacheSizes{});
  EXPECT_EQ(pairs.max_rows_b_in_place, 0);
}

// One tile of all m rows; panels of 4 zmm up to 7 rows (4 * 7 + 4 = 32 registers), 3 up to 9,
// 2 up to 15, 1 up to 31; AVX2 (14 registers beside the broadcasts): 7 ymm for one row, 4 for
// two, 3 for three, 2 up to 6.
TEST(InPlacePlan, OneTileOfAllRowsAndPanelsThatFit) {
  const GemmPlan zmm = MakePlan(IsaLevel::kAvx512, GemmType::kF32F32F32, CacheSizes{}, kZen5);
  const int want_nr[] = {0, 64, 64, 64, 64, 64, 64, 64, 48, 48, 32, 32, 32, 32, 32, 32};
  for (int64_t m = 1; m <= 31; ++m) {
    const GemmPlan p = InPlacePlan(zmm, m);
    EXPECT_EQ(p.mr, m);
    EXPECT_EQ(p.mc, m);
    EXPECT_EQ(p.nr, m <= 15 ? want_nr[m] : 16) << m;
    EXPECT_EQ(p.nc % p.nr, 0) << m;
    EXPECT_TRUE(ValidatePlan(p).ok()) << m;
  }
  const GemmPlan ymm = MakePlan(IsaLevel::kAvx2, GemmType::kF32F32F32, CacheSizes{});
  const int want_ymm_nr[] = {0, 56, 32, 24, 16, 16, 16};
  for (int64_t m = 1; m <= 6; ++m) {
    const GemmPlan p = InPlacePlan(ymm, m);
    EXPECT_EQ(p.mr, m);
    EXPECT_EQ(p.nr, want_ymm_nr[m]) << m;
    EXPECT_EQ(p.nc % p.nr, 0) << m;
    EXPECT_TRUE(ValidatePlan(p).ok()) << m;
  }
}

// Memory that ends at an inaccessible page: a kernel load past the end faults.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    data_bytes_ = (bytes + page - 1) / page * page;
    base_ = mmap(nullptr, data_bytes_ + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      return;
    }
    mprotect(static_cast<char*>(base_) + data_bytes_, page, PROT_NONE);
    data_ = static_cast<char*>(base_) + data_bytes_ - bytes;
  }
  ~GuardedBuffer() {
    if (base_ != nullptr) munmap(base_, data_bytes_ + static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  char* data() const { return data_; }

 private:
  void* base_ = nullptr;
  size_t data_bytes_ = 0;
  char* data_ = nullptr;
};

// One in-place key against the portable kernel: small-integer values (exact sums), B rows `ld`
// elements (f32 or bf16) apart with its last read element the last before a guard page.
void CheckInPlaceKernel(const KernelKey& key, std::mt19937& rng) {
  absl::StatusOr<MicroKernelFn> fn = KernelCache::Global().Get(key);
  ASSERT_TRUE(fn.ok()) << key.Name() << ": " << fn.status();
  std::uniform_int_distribution<int> small(-3, 3);
  const int elem = RowElementBytes(key.b_in_place);
  for (int64_t n_panels : {1, 2, 5}) {
    for (int64_t k_steps : {1, 2, 3, 4, 5, 7, 8, 13, 41}) {
      const int64_t ld = n_panels * key.nr + (k_steps % 3 == 0 ? 0 : 7);
      const int64_t b_elements = (k_steps - 1) * ld + n_panels * key.nr;
      GuardedBuffer b(b_elements * elem);
      ASSERT_NE(b.data(), nullptr);
      for (int64_t i = 0; i < b_elements; ++i) {
        const float x = static_cast<float>(small(rng));
        if (key.b_in_place == RowSource::kBf16) {
          const uint16_t h = ir::bf16::FromFloat(x);
          std::memcpy(b.data() + 2 * i, &h, 2);
        } else {
          std::memcpy(b.data() + 4 * i, &x, 4);
        }
      }
      std::vector<float> a(k_steps * key.mr);
      for (float& x : a) x = static_cast<float>(small(rng));
      const int64_t ldc = n_panels * key.nr + 3;
      std::vector<float> want(key.rows * ldc);
      for (float& x : want) x = static_cast<float>(small(rng));
      std::vector<float> got = want;
      MicroKernelArgs args;
      args.a = a.data();
      args.b = b.data();
      args.ldc = ldc * 4;
      args.k_steps = k_steps;
      args.n_panels = n_panels;
      args.b_panel_stride = key.nr * elem;
      args.b_step_stride = ld * elem;
      args.accumulate = k_steps % 2;
      MicroKernelArgs portable = args;
      portable.c = want.data();
      portable.key = &key;
      PortableMicroKernel(&portable);
      args.c = got.data();
      (*fn)(&args);
      EXPECT_EQ(got, want) << key.Name() << " panels=" << n_panels << " k_steps=" << k_steps;
    }
  }
}

void CheckInPlaceKernels(IsaLevel isa, int lanes, int max_rows) {
  std::mt19937 rng(23);
  for (RowSource rows_of : {RowSource::kF32, RowSource::kBf16}) {
    for (int rows = 1; rows <= max_rows; ++rows) {
      const GemmPlan plan =
          InPlacePlan(MakePlan(isa, GemmType::kF32F32F32, CacheSizes{}, kZen5), rows);
      KernelKey key{PanelLayout::kF32, isa, plan.mr, plan.nr, rows, 0};
      key.b_in_place = rows_of;
      CheckInPlaceKernel(key, rng);
      if (rows == max_rows) {  // a tile of fewer rows than its panel holds, and narrow panels
        key.rows = rows - 1;
        CheckInPlaceKernel(key, rng);
        key = KernelKey{PanelLayout::kF32, isa, rows, lanes, rows, 0};
        key.b_in_place = rows_of;
        CheckInPlaceKernel(key, rng);
      }
    }
  }
}

TEST(InPlaceKernels, MatchThePortableKernelAvx2) {
  if (DetectedIsa() < IsaLevel::kAvx2) GTEST_SKIP() << "this CPU lacks avx2";
  CheckInPlaceKernels(IsaLevel::kAvx2, 8, 6);
}

// Hosts without AVX-512 check these kernels in the emulator (emulation/dump_kernels).
TEST(InPlaceKernels, MatchThePortableKernelAvx512) {
  if (DetectedIsa() < IsaLevel::kAvx512) GTEST_SKIP() << "this CPU lacks avx512";
  CheckInPlaceKernels(IsaLevel::kAvx512, 16, 31);  // 31 rows: no spare register for broadcasts
}

TEST(InPlaceKernels, OnlyFullF32PanelsWithoutAStream) {
  KernelKey key{PanelLayout::kF32, IsaLevel::kAvx2, 6, 16, 6, 0};
  key.b_in_place = RowSource::kF32;
  EXPECT_EQ(key.Name(), "gemm_avx2_f32_6x16_r6_t0_bf32");
  key.b_in_place = RowSource::kBf16;
  EXPECT_EQ(key.Name(), "gemm_avx2_f32_6x16_r6_t0_bbf16");
  KernelKey tail = key;
  tail.tail_vecs = 1;
  KernelKey stream = key;
  stream.stream = RowSource::kF32;
  KernelKey pairs = key;
  pairs.layout = PanelLayout::kBf16Pairs;
  pairs.isa = IsaLevel::kAvx512Bf16;
  pairs.nr = 64;
  for (const KernelKey& bad : {tail, stream, pairs}) {
    absl::StatusOr<MicroKernelFn> fn = KernelCache::Global().Get(bad);
    EXPECT_EQ(fn.status().code(), absl::StatusCode::kInvalidArgument) << bad.Name();
    EXPECT_NE(fn.status().message().find("reads B in place"), std::string::npos) << bad.Name();
  }
}

constexpr IsaLevel kInPlaceLevels[] = {IsaLevel::kAvx2, IsaLevel::kAvx512};

// Whole products: several depth and column blocks (small ones), tail panels, padded rows of B,
// f32 and bf16 inputs, accumulation, bf16 output, two threads, at a level's generated kernels or
// the portable one.
void CheckInPlaceProducts(IsaLevel isa, bool portable) {
  // Zen 5's plan: every tile height any CPU's plan reads in place (up to 31 rows with AVX-512).
  GemmPlan plan = MakePlan(isa, GemmType::kF32F32F32, CacheSizes{}, kZen5);
  plan.kc = 40;
  plan.nc = 192;  // 3 panels of 64, 4 of 48, 6 of 32; AVX2 12 of 16, 8 of 24, 6 of 32, 3 of 56
  plan.portable_kernels = portable;
  plan.min_flops_per_thread = 0;
  int seed = 0;
  // Tile heights 1-8, then every third, and the tallest.
  std::vector<int64_t> heights;
  for (int64_t m = 1; m <= plan.max_rows_b_in_place; m += (m < 8 ? 1 : 3)) heights.push_back(m);
  if (heights.back() != plan.max_rows_b_in_place) heights.push_back(plan.max_rows_b_in_place);
  for (int64_t m : heights) {
    const int64_t nr = InPlacePlan(plan, m).nr;
    for (int64_t n : {nr, nr + 1, 2 * nr + 15, 7 * nr + 33}) {
      for (int64_t k : {1, 3, 40, 97}) {
        Case c;
        c.shape = {m, n, k};
        c.bf16_in = seed % 2 == 1;  // widened as the kernels load it
        c.accumulate = seed % 3 == 1;
        c.out_bf16 = seed % 5 == 2;
        c.pad = seed % 4 == 3 ? 5 : 0;
        c.threads = seed % 7 == 4 ? 2 : 1;
        Problem p(c, 7000 + ++seed);
        KernelSet kernels;
        ASSERT_TRUE(kernels.Prepare(plan, p.args).ok()) << c.Name();
        EXPECT_TRUE(kernels.b_in_place()) << c.Name();
        EXPECT_EQ(kernels.plan().mr, m) << c.Name();
        p.Check(fmt::format("{}{} in place", IsaName(isa), portable ? " portable" : ""),
                [&](const GemmArgs& g) { return internal::GemmWithPlan(g, isa, &plan); });
      }
    }
  }
}

TEST(InPlaceProducts, MatchTheOracleAtHostLevels) {
  for (IsaLevel isa : kInPlaceLevels) {
    if (isa > DetectedIsa()) continue;
    CheckInPlaceProducts(isa, /*portable=*/false);
  }
}

// The driver and the tail packing of every level, on any host.
TEST(InPlaceProducts, MatchTheOracleWithPortableKernels) {
  for (IsaLevel isa : kInPlaceLevels) CheckInPlaceProducts(isa, /*portable=*/true);
}

// Through Gemm's own dispatch and blocking: host-sized blocks, B in several of them.
TEST(InPlaceProducts, MatchTheOracleWithHostBlocking) {
  for (int64_t m : {1, 4, 6, 9, 15}) {
    Case c;
    c.shape = {m, 2500, 1100};
    c.bf16_in = m == 4 || m == 9;
    c.accumulate = m % 2 == 0;
    Problem p(c, 9000 + static_cast<uint32_t>(m));
    p.Check(fmt::format("host in place m={}", m), [](const GemmArgs& g) { return Gemm(g); });
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
