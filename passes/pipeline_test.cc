// The pipeline: records every stage ("(unchanged)" when nothing changed), disables passes by
// name, dumps after each stage, and reports a pass that breaks the module.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "passes/pipeline.h"

namespace shardjit::passes {
namespace {

using ::testing::HasSubstr;

const char kWrapper[] =
    "module m [view=global mesh={x:2} devices=(0,1) entry=main param_shardings=(P(x)) "
    "result_shardings=(P())]\n"
    "func main = { lambda ; a:f32[4]. let\n"
    "    d:f32[4] = shard_map[in_specs=(P(x)) out_specs=(P(x)) body={ lambda ; b:f32[2]. let\n"
    "          c:f32[2] = psum[axes=(x)] b\n"
    "        in (c) }] a\n"
    "  in (d) }\n";

TEST(PipelineTest, RecordsStagesAndLowersShardMap) {
  ir::Module m = *ir::ParseModule(kWrapper);
  std::vector<StageRecord> stages;
  ASSERT_TRUE(DefaultPipeline().Run(m, &stages).ok());
  ASSERT_EQ(stages.size(), 9u);
  EXPECT_EQ(stages[1].pass, "inline-calls");
  EXPECT_FALSE(stages[1].changed);
  EXPECT_EQ(stages[2].pass, "canonicalize");
  EXPECT_EQ(stages[2].text, "(unchanged)");
  // A shard_map has no partitioning rule: the SPMD passes leave the module to lower-shard-map.
  EXPECT_EQ(stages[3].pass, "sharding-propagation");
  EXPECT_FALSE(stages[3].changed);
  EXPECT_EQ(stages[4].pass, "spmd-partition");
  EXPECT_FALSE(stages[4].changed);
  EXPECT_EQ(stages[5].pass, "lower-shard-map");
  EXPECT_TRUE(stages[5].changed);
  EXPECT_EQ(stages[5].text,
            "module m [view=per_device mesh={x:2} devices=(0,1) entry=main "
            "param_shardings=(P(x)) result_shardings=(P(x))]\n"
            "func main = { lambda ; a:f32[2]. let\n"
            "    b:f32[2] = psum[axes=(x)] a\n"
            "  in (b) }\n");
  // The psum over x of a block that varies along x stays.
  EXPECT_EQ(stages[6].pass, "collective-simplify");
  EXPECT_FALSE(stages[6].changed);
  // A lone collective has no dot_general to fuse with, and nothing elementwise to fuse.
  EXPECT_EQ(stages[7].pass, "collective-fusion");
  EXPECT_FALSE(stages[7].changed);
  EXPECT_EQ(stages[8].pass, "fuse-elementwise");
  EXPECT_FALSE(stages[8].changed);
}

TEST(PipelineTest, DisablesPassesByName) {
  ir::Module m = *ir::ParseModule(kWrapper);
  std::vector<StageRecord> stages;
  ASSERT_TRUE(DefaultPipeline({.disabled = {"lower-shard-map"}}).Run(m, &stages).ok());
  EXPECT_TRUE(stages[5].skipped);
  EXPECT_EQ(m.view(), ir::GLOBAL);
}

TEST(PipelineTest, DumpsEveryStage) {
  std::string dir = ::testing::TempDir() + "/dumps";
  ir::Module m = *ir::ParseModule(kWrapper);
  ASSERT_TRUE(DefaultPipeline({.dump_dir = dir}).Run(m).ok());
  for (const char* name : {"00-m-input", "01-m-inline-calls", "02-m-canonicalize",
                           "03-m-sharding-propagation", "04-m-spmd-partition",
                           "05-m-lower-shard-map", "06-m-collective-simplify"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + name + ".txt")) << name;
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + name + ".pbtxt")) << name;
  }
}

TEST(PipelineTest, DumpsOfASecondModuleOfTheSameNameKeepTheFirst) {
  std::string dir = ::testing::TempDir() + "/dumps_twice";
  for (int run = 0; run < 2; ++run) {
    ir::Module m = *ir::ParseModule(kWrapper);
    ASSERT_TRUE(DefaultPipeline({.dump_dir = dir}).Run(m).ok());
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/00-m-input.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/00-m.2-input.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/06-m.2-collective-simplify.pbtxt"));
}

// A pass that leaves an invalid module behind.
class BreakTypes final : public Pass {
 public:
  std::string name() const override { return "break-types"; }
  absl::StatusOr<bool> Run(ir::Module& m) override {
    m.mutable_functions(0)->mutable_body()->mutable_ops(0)->mutable_result_types(0)->add_dims(9);
    return true;
  }
};

TEST(PipelineTest, VerifiesAfterEachPass) {
  ir::Module m = *ir::ParseModule(kWrapper);
  Pipeline p;
  p.Add(std::make_unique<BreakTypes>());
  absl::Status s = p.Run(m);
  EXPECT_THAT(std::string(s.message()), HasSubstr("pass break-types produced an invalid module"));
}

}  // namespace
}  // namespace shardjit::passes
