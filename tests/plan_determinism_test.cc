// The same program, mesh and options lower to the same plan in every process: the x86 backend
// prices plans by this host's machine model, measured once and kept in a file
// (backends/x86/host_rates.h), so 20 processes started together (racing to measure it) print one
// plan, and the plan records the model it was priced by. A model that prices collectives
// differently changes the plan, so the agreement is not an accident of a plan no model affects.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

std::string PrintPlan() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "__main__") +
         "/tests/print_plan";
}

// Starts `count` print_plan processes at once with `env` (VAR=value, space separated) and returns
// what each printed.
std::vector<std::string> RunTogether(int count, const std::string& env) {
  std::vector<FILE*> pipes;
  for (int i = 0; i < count; ++i) {
    const std::string command = "env " + env + " " + PrintPlan();
    FILE* p = ::popen(command.c_str(), "r");
    EXPECT_NE(p, nullptr) << command;
    if (p != nullptr) pipes.push_back(p);
  }
  std::vector<std::string> outputs;
  for (FILE* p : pipes) {
    std::string out;
    char buffer[1 << 16];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), p)) > 0) out.append(buffer, n);
    const int status = ::pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "print_plan failed: " << out;
    outputs.push_back(std::move(out));
  }
  return outputs;
}

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(PlanDeterminism, TwentyProcessesLowerTheSameProgramToOnePlan) {
  const std::string cache = TempDir("cache");
  std::vector<std::string> plans = RunTogether(20, "-u SHARDJIT_MACHINE_MODEL XDG_CACHE_HOME=" + cache);
  ASSERT_EQ(plans.size(), 20u);
  ASSERT_THAT(plans[0], HasSubstr("# variant f"));
  for (size_t i = 1; i < plans.size(); ++i) {
    ASSERT_EQ(plans[i], plans[0]) << "process " << i << " lowered another plan";
  }
  // The plan names the model it was priced by: the one file every process read.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache + "/shardjit")) {
    const std::string path = entry.path().string();
    if (path.size() > 4 && path.substr(path.size() - 4) == ".txt") {
      ++files;
      EXPECT_THAT(plans[0], HasSubstr(",\"" + path + "\")]"));
    }
  }
  EXPECT_EQ(files, 1);
  // A later process reads the kept model: the same plan again.
  EXPECT_EQ(RunTogether(1, "-u SHARDJIT_MACHINE_MODEL XDG_CACHE_HOME=" + cache)[0], plans[0]);
}

TEST(PlanDeterminism, TheModelChangesThePlanAndIsRecorded) {
  const std::string dir = TempDir("models");
  // Collectives that cost a second each: no ring pays for its steps.
  const std::string slow = dir + "/slow.txt";
  FILE* f = std::fopen(slow.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fprintf(f, "flops_per_second=%a bytes_per_second=%a seconds_per_collective=%a\n", 1e11,
               1e12, 1.0);
  std::fclose(f);
  const std::string slow_plan = RunTogether(1, "SHARDJIT_MACHINE_MODEL=" + slow)[0];
  EXPECT_THAT(slow_plan, HasSubstr(",1,\"" + slow + "\")]"));
  const std::string default_plan = RunTogether(1, "SHARDJIT_MACHINE_MODEL=defaults")[0];
  EXPECT_THAT(default_plan, HasSubstr(",defaults)]"));
  EXPECT_THAT(default_plan, HasSubstr("dot_accumulate"));  // collective-fusion's rings
  EXPECT_THAT(slow_plan, ::testing::Not(HasSubstr("dot_accumulate")));
}

TEST(PlanDeterminism, AMalformedModelFileIsNamedInThePlan) {
  const std::string dir = TempDir("bad");
  const std::string bad = dir + "/bad.txt";
  FILE* f = std::fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fprintf(f, "flops_per_second=fast\n");
  std::fclose(f);
  const std::string plan = RunTogether(1, "SHARDJIT_MACHINE_MODEL=" + bad)[0];
  EXPECT_THAT(plan, HasSubstr(",\"measured (machine model " + bad));
}

}  // namespace
