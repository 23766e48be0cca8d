// Running tests at each ISA level on one host: the levels, a scoped cap, and a fixture for tests
// parameterized by the level.
#ifndef SHARDJIT_BACKENDS_X86_ISA_TEST_UTIL_H_
#define SHARDJIT_BACKENDS_X86_ISA_TEST_UTIL_H_

#include <string>
#include <vector>

#include "backends/x86/cpu_features.h"
#include "gtest/gtest.h"

namespace shardjit::backends::x86 {

// Every level, lowest first: the values of an IsaLevelTest suite.
inline constexpr IsaLevel kAllIsaLevels[] = {IsaLevel::kReference, IsaLevel::kAvx2,
                                             IsaLevel::kAvx512, IsaLevel::kAvx512Bf16,
                                             IsaLevel::kAmxBf16};

// The levels this host runs: reference, avx2, ... up to DetectedIsa().
inline std::vector<IsaLevel> HostIsaLevels() {
  std::vector<IsaLevel> levels;
  for (IsaLevel isa : kAllIsaLevels) {
    if (isa <= DetectedIsa()) levels.push_back(isa);
  }
  return levels;
}

// Caps the ISA for a scope and restores the previous cap after.
class ScopedMaxIsa {
 public:
  explicit ScopedMaxIsa(IsaLevel isa) : saved_(MaxIsa()) { SetMaxIsa(isa); }
  ~ScopedMaxIsa() { SetMaxIsa(saved_); }
  ScopedMaxIsa(const ScopedMaxIsa&) = delete;
  ScopedMaxIsa& operator=(const ScopedMaxIsa&) = delete;

 private:
  IsaLevel saved_;
};

// A test at the ISA level of its parameter: skipped where this CPU lacks the level, else run with
// the ISA capped to it. Instantiate over kAllIsaLevels, named by IsaLevelName:
//   INSTANTIATE_TEST_SUITE_P(Isa, MyTest, ::testing::ValuesIn(kAllIsaLevels), IsaLevelName);
class IsaLevelTest : public ::testing::TestWithParam<IsaLevel> {
 protected:
  void SetUp() override {
    if (GetParam() > DetectedIsa()) GTEST_SKIP() << "this CPU lacks " << IsaName(GetParam());
    saved_ = MaxIsa();
    SetMaxIsa(GetParam());
  }
  void TearDown() override {
    if (GetParam() <= DetectedIsa()) SetMaxIsa(saved_);
  }

 private:
  IsaLevel saved_ = IsaLevel::kAvx512Bf16;
};

// Names the instances of an IsaLevelTest suite "reference", "avx2", "avx512", "avx512_bf16".
inline std::string IsaLevelName(const ::testing::TestParamInfo<IsaLevel>& info) {
  return std::string(IsaName(info.param));
}

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_ISA_TEST_UTIL_H_
