// The generated loops never touch memory outside their arrays: every operand and the result are
// placed against an inaccessible (PROT_NONE) page, after their last element or before their first,
// for odd lengths and every element size; a stray access in the masked tail would fault.
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "backends/reference/kernel.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/elementwise.h"
#include "backends/x86/elementwise_test_util.h"
#include "backends/x86/isa_test_util.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "ir/fmt_absl.h"
#include "ir/types.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;
using ir::Tensor;

// Memory next to an inaccessible page: each block ends where the page begins, or (`guard_before`)
// starts where it ends. Blocks are deliberately unaligned in the first case.
class GuardedAllocator final : public ir::Allocator {
 public:
  explicit GuardedAllocator(bool guard_before) : guard_before_(guard_before) {}
  ~GuardedAllocator() override {
    for (const auto& [ptr, mapping] : mappings_) munmap(mapping.first, mapping.second);
  }

  void* Allocate(size_t bytes) override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes + page - 1) / page;
    const size_t length = (data_pages + 1) * page;
    void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(base, MAP_FAILED);
    char* first = static_cast<char*>(base);
    char* guard = guard_before_ ? first : first + data_pages * page;
    EXPECT_EQ(mprotect(guard, page, PROT_NONE), 0);
    char* ptr = guard_before_ ? first + page : guard - bytes;
    mappings_[ptr] = {base, length};
    return ptr;
  }
  void Deallocate(void* ptr, size_t) override {
    auto it = mappings_.find(ptr);
    if (it == mappings_.end()) return;
    munmap(it->second.first, it->second.second);
    mappings_.erase(it);
  }

 private:
  bool guard_before_;
  std::map<void*, std::pair<void*, size_t>> mappings_;
};

struct TailCase {
  std::string name;
  std::string params;
  std::string fusion;
};

std::vector<TailCase> Cases() {
  return {
      {"AddF32", "a:f32[N] b:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; c:f32[N] d:f32[N]. let e:f32[N] = add c d "
       "in (e) }] a b"},
      {"AddBf16", "a:bf16[N] b:bf16[N]",
       "z:bf16[N] = fusion[body={ lambda ; c:bf16[N] d:bf16[N]. let e:bf16[N] = add c d "
       "in (e) }] a b"},
      {"MulS32", "a:s32[N] b:s32[N]",
       "z:s32[N] = fusion[body={ lambda ; c:s32[N] d:s32[N]. let e:s32[N] = mul c d "
       "in (e) }] a b"},
      {"ComparePred", "a:pred[N] b:pred[N]",
       "z:pred[N] = fusion[body={ lambda ; c:pred[N] d:pred[N]. let "
       "e:pred[N] = compare[direction=NE] c d in (e) }] a b"},
      {"F32ToBf16", "a:f32[N]",
       "z:bf16[N] = fusion[body={ lambda ; b:f32[N]. let "
       "c:bf16[N] = convert_element_type[new_dtype=bf16] b in (c) }] a"},
      {"Bf16ToF32", "a:bf16[N]",
       "z:f32[N] = fusion[body={ lambda ; b:bf16[N]. let "
       "c:f32[N] = convert_element_type[new_dtype=f32] b in (c) }] a"},
      {"CompareF32", "a:f32[N] b:f32[N]",
       "z:pred[N] = fusion[body={ lambda ; c:f32[N] d:f32[N]. let "
       "e:pred[N] = compare[direction=LT] c d in (e) }] a b"},
      {"SelectBf16", "a:pred[N] b:bf16[N] c:bf16[N]",
       "z:bf16[N] = fusion[body={ lambda ; d:pred[N] e:bf16[N] f:bf16[N]. let "
       "g:bf16[N] = select d e f in (g) }] a b c"},
  };
}

constexpr int64_t kOddLengths[] = {1, 3, 7, 9, 15, 17, 31, 33, 1001};

TEST(ElementwiseTailTest, FusionsStayInsideTheirArrays) {
  const reference::Kernel* oracle = reference::FindKernel("fusion");
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa < IsaLevel::kAvx2) continue;
    ScopedMaxIsa cap(isa);
    for (bool guard_before : {false, true}) {
      GuardedAllocator guarded(guard_before);
      for (const TailCase& c : Cases()) {
        for (int64_t n : kOddLengths) {
          const std::string what = fmt::format("{} n={} isa={} guard {}", c.name, n, IsaName(isa),
                                               guard_before ? "before" : "after");
          ir::Op op = FusionOp(c.params, c.fusion, n);
          std::vector<Tensor> operands = RandomOperands(op, static_cast<uint32_t>(n), &guarded);
          absl::StatusOr<std::vector<Tensor>> got = FusionKernel(op, operands, &guarded);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status();
          ExpectClose((*got)[0], (*(*oracle)(op, operands, nullptr))[0], 0, what,
                      OpenNanLanes(NanRule::kOpenWhereTwoNans, operands, n));
        }
      }
    }
  }
}

TEST(ElementwiseTailTest, ReduceBuffersStaysInsideItsArrays) {
  for (IsaLevel isa : HostIsaLevels()) {
    if (isa < IsaLevel::kAvx2) continue;
    ScopedMaxIsa cap(isa);
    for (bool guard_before : {false, true}) {
      GuardedAllocator guarded(guard_before);
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        for (int64_t n : kOddLengths) {
          Tensor a = RandomTensor({dtype, {n}}, 5).Copy(&guarded);
          Tensor b = RandomTensor({dtype, {n}}, 6).Copy(&guarded);
          ir::Op op;
          op.set_opcode("max");
          *op.add_result_types() = ir::ToProto(a.type());
          Tensor want = (*(*reference::FindKernel("max"))(op, {a, b}, nullptr))[0];
          ASSERT_TRUE(ReduceBuffers(ReduceKind::kMax, dtype, a.data(), b.data(), b.data(), n).ok());
          ExpectClose(b, want, 0, fmt::format("{} n={}", ir::DTypeName(dtype), n));
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
