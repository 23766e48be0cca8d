// The device allocator: live bytes and peak accounted per request, freed blocks reused within
// their bounds (small ones a fixed total, large ones twice the peak of live bytes).
#include "runtime/device.h"

#include <algorithm>
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

TEST(AccountingAllocator, KeepsAtMostItsBoundOfSmallBlocks) {
  if (!kDeviceReusesBlocks) GTEST_SKIP() << "blocks go back to malloc under AddressSanitizer";
  auto a = std::make_shared<AccountingAllocator>();
  std::vector<void*> blocks;
  const size_t n = 2 * AccountingAllocator::kMaxCachedBytes / AccountingAllocator::kMaxCachedBlock;
  for (size_t i = 0; i < n; ++i) {
    blocks.push_back(a->Allocate(AccountingAllocator::kMaxCachedBlock));
  }
  for (void* b : blocks) a->Deallocate(b, AccountingAllocator::kMaxCachedBlock);
  EXPECT_EQ(a->cached_bytes(), AccountingAllocator::kMaxCachedBytes);
  EXPECT_EQ(a->stats().current_bytes, 0);
  a->ReleaseCached();
  EXPECT_EQ(a->cached_bytes(), 0u);
}

TEST(AccountingAllocator, ReusesBlocksPastTheSmallClassesUpToThePeak) {
  if (!kDeviceReusesBlocks) GTEST_SKIP() << "blocks go back to malloc under AddressSanitizer";
  // More 1 MiB blocks than the small classes' bound holds: all kept, since the peak held them.
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t n = 2 * AccountingAllocator::kMaxCachedBytes / kMiB;
  auto a = std::make_shared<AccountingAllocator>();
  std::vector<void*> blocks;
  for (size_t i = 0; i < n; ++i) blocks.push_back(a->Allocate(kMiB));
  for (void* b : blocks) a->Deallocate(b, kMiB);
  EXPECT_EQ(a->cached_bytes(), n * kMiB);
  std::vector<void*> again;
  for (size_t i = 0; i < n; ++i) again.push_back(a->Allocate(kMiB));
  EXPECT_EQ(a->cached_bytes(), 0u);
  std::sort(blocks.begin(), blocks.end());
  std::sort(again.begin(), again.end());
  EXPECT_EQ(again, blocks);
  for (void* b : again) a->Deallocate(b, kMiB);
}

TEST(AccountingAllocator, LargeClassesAreAnEighthOfTheirPowerOfTwo) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(AccountingAllocator::LargeClassBytes(kMiB + 1), kMiB + kMiB / 8);
  EXPECT_EQ(AccountingAllocator::LargeClassBytes(3 * kMiB), 3 * kMiB);
  EXPECT_EQ(AccountingAllocator::LargeClassBytes(3 * kMiB + 1), 3 * kMiB + kMiB / 4);
  EXPECT_EQ(AccountingAllocator::LargeClassBytes(16 * kMiB), 16 * kMiB);
  EXPECT_EQ(AccountingAllocator::LargeClassBytes(16 * kMiB - 1), 16 * kMiB);
  for (size_t bytes = kMiB + 1; bytes < 300 * kMiB; bytes = bytes * 7 / 5 + 4093) {
    const size_t block = AccountingAllocator::LargeClassBytes(bytes);
    EXPECT_GE(block, bytes);
    EXPECT_LE(block, bytes + bytes / 8) << bytes;
  }
}

TEST(AccountingAllocator, ReusesLargeBlocksUpToTwiceThePeak) {
  if (!kDeviceReusesBlocks) GTEST_SKIP() << "blocks go back to malloc under AddressSanitizer";
  constexpr size_t kMiB = size_t{1} << 20;
  auto a = std::make_shared<AccountingAllocator>();
  // Two live 8 MiB blocks: both kept when freed (the peak was 16 MiB).
  void* p = a->Allocate(8 * kMiB);
  void* q = a->Allocate(8 * kMiB - 100);  // the same class
  std::memset(p, 1, 8 * kMiB);
  a->Deallocate(p, 8 * kMiB);
  a->Deallocate(q, 8 * kMiB - 100);
  EXPECT_EQ(a->cached_bytes(), 16 * kMiB);
  EXPECT_EQ(a->stats().current_bytes, 0);
  // Served from the cache within the class, fresh outside it.
  void* r = a->Allocate(8 * kMiB - 5000);
  EXPECT_TRUE(r == p || r == q);
  EXPECT_EQ(a->cached_bytes(), 8 * kMiB);
  EXPECT_EQ(a->stats().current_bytes, static_cast<int64_t>(8 * kMiB - 5000));
  void* s = a->Allocate(9 * kMiB + 1);
  EXPECT_NE(s, p);
  EXPECT_NE(s, q);
  static_cast<char*>(s)[9 * kMiB] = 2;
  a->Deallocate(r, 8 * kMiB - 5000);
  // Peak 17 MiB: 8 + 8 + 10 MiB pass it but not twice it; all kept.
  a->Deallocate(s, 9 * kMiB + 1);
  EXPECT_EQ(a->cached_bytes(), 26 * kMiB);
  void* again = a->Allocate(9 * kMiB + 1);
  EXPECT_EQ(again, s);
  a->Deallocate(again, 9 * kMiB + 1);
  // After the peak is reset, only what fits under the new one is kept.
  a->ReleaseCached();
  a->ResetPeak();
  void* t = a->Allocate(2 * kMiB);
  void* u = a->Allocate(3 * kMiB);
  a->Deallocate(u, 3 * kMiB);  // peak 5 MiB: kept
  EXPECT_EQ(a->cached_bytes(), 3 * kMiB);
  a->ResetPeak();              // peak 2 MiB: 3 + 2 MiB would pass 4.25 MiB
  a->Deallocate(t, 2 * kMiB);
  EXPECT_EQ(a->cached_bytes(), 2 * kMiB);
  EXPECT_EQ(a->Allocate(2 * kMiB), t);
  a->Deallocate(t, 2 * kMiB);
  a->ReleaseCached();
  EXPECT_EQ(a->cached_bytes(), 0u);
  EXPECT_EQ(a->stats().current_bytes, 0);
}

// Several blocks of a class kept: the class serves its most recent, and past the bound the
// blocks kept longest go first, whatever their class.
TEST(AccountingAllocator, EvictsTheOldestBlocksAcrossClasses) {
  if (!kDeviceReusesBlocks) GTEST_SKIP() << "blocks go back to malloc under AddressSanitizer";
  constexpr size_t kMiB = size_t{1} << 20;
  auto a = std::make_shared<AccountingAllocator>();
  // Two 1 MiB blocks live at once: peak 2 MiB, bound 4.25 MiB.
  void* a1 = a->Allocate(kMiB);
  void* a2 = a->Allocate(kMiB);
  a->Deallocate(a1, kMiB);
  a->Deallocate(a2, kMiB);
  EXPECT_EQ(a->cached_bytes(), 2 * kMiB);
  EXPECT_EQ(a->Allocate(kMiB), a2);  // the class's most recent
  a->Deallocate(a2, kMiB);           // kept: a1, a2 oldest first
  void* b = a->Allocate(kMiB + kMiB / 2);
  a->Deallocate(b, kMiB + kMiB / 2);  // 3.5 MiB kept
  void* c = a->Allocate(2 * kMiB);
  a->Deallocate(c, 2 * kMiB);  // 5.5 MiB would pass the bound: a1, then a2, go
  EXPECT_EQ(a->cached_bytes(), 3 * kMiB + kMiB / 2);
  EXPECT_EQ(a->Allocate(kMiB + kMiB / 2), b);
  EXPECT_EQ(a->Allocate(2 * kMiB), c);
  EXPECT_EQ(a->cached_bytes(), 0u);
  a->Deallocate(b, kMiB + kMiB / 2);
  a->Deallocate(c, 2 * kMiB);
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
