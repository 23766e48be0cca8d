// The device allocator: live bytes and peak accounted per request, freed small blocks reused
// within a bound, large blocks returned at once.
#include "runtime/device.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardjit::runtime {
namespace {

TEST(AccountingAllocator, CountsLiveBytesAndPeakPerRequest) {
  auto a = std::make_shared<AccountingAllocator>();
  void* p = a->Allocate(100);
  void* q = a->Allocate(3000);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
  std::memset(p, 1, 100);
  std::memset(q, 2, 3000);
  EXPECT_EQ(a->stats().current_bytes, 3100);
  a->Deallocate(p, 100);
  EXPECT_EQ(a->stats().current_bytes, 3000);
  EXPECT_EQ(a->stats().peak_bytes, 3100);
  a->ResetPeak();
  EXPECT_EQ(a->stats().peak_bytes, 3000);
  a->Deallocate(q, 3000);
  EXPECT_EQ(a->stats().current_bytes, 0);
  EXPECT_EQ(a->Allocate(0), nullptr);
  a->Deallocate(nullptr, 0);
  EXPECT_EQ(a->stats().current_bytes, 0);
}

TEST(AccountingAllocator, ReusesFreedBlocksOfTheSameClass) {
  if (!kDeviceReusesBlocks) GTEST_SKIP() << "blocks go back to malloc under AddressSanitizer";
  auto a = std::make_shared<AccountingAllocator>();
  void* p = a->Allocate(1000);
  a->Deallocate(p, 1000);
  EXPECT_EQ(a->cached_bytes(), 1024u);
  // 1000 and 1024 bytes share the 1 KiB class; 1025 does not.
  EXPECT_EQ(a->Allocate(1024), p);
  EXPECT_EQ(a->cached_bytes(), 0u);
  void* r = a->Allocate(1025);
  EXPECT_NE(r, p);
  a->Deallocate(p, 1024);
  a->Deallocate(r, 1025);
  EXPECT_EQ(a->cached_bytes(), 1024u + 2048u);
  EXPECT_EQ(a->stats().current_bytes, 0);
}

TEST(AccountingAllocator, KeepsAtMostItsBoundAndNoLargeBlocks) {
  if (!kDeviceReusesBlocks) GTEST_SKIP() << "blocks go back to malloc under AddressSanitizer";
  auto a = std::make_shared<AccountingAllocator>();
  void* large = a->Allocate(AccountingAllocator::kMaxCachedBlock + 1);
  a->Deallocate(large, AccountingAllocator::kMaxCachedBlock + 1);
  EXPECT_EQ(a->cached_bytes(), 0u);
  std::vector<void*> blocks;
  const size_t n = 2 * AccountingAllocator::kMaxCachedBytes / AccountingAllocator::kMaxCachedBlock;
  for (size_t i = 0; i < n; ++i) {
    blocks.push_back(a->Allocate(AccountingAllocator::kMaxCachedBlock));
  }
  for (void* b : blocks) a->Deallocate(b, AccountingAllocator::kMaxCachedBlock);
  EXPECT_EQ(a->cached_bytes(), AccountingAllocator::kMaxCachedBytes);
  EXPECT_EQ(a->stats().current_bytes, 0);
}

TEST(AccountingAllocator, AllocatesAndFreesFromManyThreads) {
  auto a = std::make_shared<AccountingAllocator>();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 2000; ++i) {
        const size_t bytes = 64 + static_cast<size_t>((i * 37 + t * 11) % 5000);
        auto* p = static_cast<unsigned char*>(a->Allocate(bytes));
        p[0] = p[bytes - 1] = static_cast<unsigned char>(i);
        a->Deallocate(p, bytes);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(a->stats().current_bytes, 0);
  EXPECT_LE(a->cached_bytes(), AccountingAllocator::kMaxCachedBytes);
}

}  // namespace
}  // namespace shardjit::runtime
