// The runtime's groups and the cost analysis' group sizes come from one description of a
// collective's groups (ir/collective_groups.h): for the same op, the group the runtime's plan
// gives each device has the size the cost analysis reports at that device.
#include "runtime/collective_plan.h"

#include <string>

#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/cost_analysis.h"

namespace shardjit::runtime {
namespace {

// Mesh {x:2, y:3}; per device, a collective of each kind, with tuple axes in both orders and
// uneven axis_index_groups.
constexpr char kModule[] = R"(module m [view=per_device mesh={x:2,y:3} devices=(0,1,2,3,4,5) entry=main]
func main = { lambda ; a:f32[6]. let
    b:f32[6] = psum[axes=(y,x) axis_index_groups=((0),(5,1,2,4,3))] a
    c:f32[2,6] = all_gather[axes=(x,y) axis=0 tiled=False axis_index_groups=((0,5),(4,1),(2,3))] a
    d:f32[6] = all_to_all[axes=(x) split_axis=0 concat_axis=0 tiled=True] a
    e:f32[6] = ppermute[axes=(y,x) perm=((0,1),(1,0))] a
    f:f32[6] = pbroadcast[axes=(y) source=2] a
    g:f32[2] = psum_scatter[axes=(y) scatter_dimension=0 tiled=True] a
  in (b, c, d, e, f, g) }
)";

TEST(CollectivePlanTest, GroupsHaveTheSizeCostAnalysisReports) {
  absl::StatusOr<ir::Module> module = ir::ParseModule(kModule);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(ir::VerifyModule(*module).ok()) << ir::VerifyModule(*module);
  const ir::Function& main = module->functions(0);
  CollectivePlan plan(module->mesh(), {&main});
  const int64_t devices = ir::MeshSize(module->mesh());
  for (int64_t p = 0; p < devices; ++p) {
    passes::CostOptions options;
    options.device = p;
    absl::StatusOr<passes::CostReport> report = passes::AnalyzeCost(*module, options);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->collectives.size(), static_cast<size_t>(main.body().ops_size()));
    for (int i = 0; i < main.body().ops_size(); ++i) {
      const ir::Op& op = main.body().ops(i);
      const absl::StatusOr<CollectiveGroup>& group = plan.Resolve(op).groups[p];
      ASSERT_TRUE(group.ok()) << group.status();
      EXPECT_EQ(group->size(), report->collectives[i].group_size)
          << op.opcode() << " at device " << p;
      // And the device is where the plan says, in its own group.
      EXPECT_EQ(group->members[group->my_index], p) << op.opcode();
    }
  }
  // The uneven psum groups: device 0 alone (its index along (y,x) is 0), the others five.
  const ir::Op& psum = main.body().ops(0);
  EXPECT_EQ(plan.Resolve(psum).groups[0]->size(), 1);
  EXPECT_EQ(plan.Resolve(psum).groups[4]->size(), 5);
  // No device chosen: the cost analysis takes the largest group.
  absl::StatusOr<passes::CostReport> any = passes::AnalyzeCost(*module);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->collectives[0].group_size, 5);
}

}  // namespace
}  // namespace shardjit::runtime
