// The groups ir/collective_groups.h computes agree with groups derived by hand: 1-D and 2-D (and
// 3-D) meshes, tuple axes in both orders, axis_index_groups; and the shape rules see the group
// size the runtime's groups have.
#include "ir/collective_groups.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/primitive.h"
#include "ir/sharding.h"

namespace shardjit::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Mesh MakeMesh(const std::vector<std::pair<std::string, int64_t>>& axes) {
  Mesh mesh;
  for (const auto& [name, size] : axes) {
    MeshAxis* a = mesh.add_axes();
    a->set_name(name);
    a->set_size(size);
  }
  return mesh;
}

AxisGroups MakeGroups(const std::vector<std::vector<int64_t>>& groups) {
  AxisGroups out;
  for (const std::vector<int64_t>& g : groups) {
    AxisIndexGroup* p = out.Add();
    for (int64_t i : g) p->add_indices(i);
  }
  return out;
}

// The group of `position`, which must resolve.
CollectiveGroup Group(const Mesh& mesh, int64_t position, const AxisList& axes,
                      const AxisGroups& groups = {}) {
  absl::StatusOr<CollectiveGroup> g = GroupOf(mesh, position, axes, groups);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : CollectiveGroup{};
}

TEST(CollectiveGroupsTest, OneDMeshIsOneRing) {
  const Mesh mesh = MakeMesh({{"x", 4}});
  for (int64_t p = 0; p < 4; ++p) {
    CollectiveGroup g = Group(mesh, p, {"x"});
    EXPECT_THAT(g.members, ElementsAre(0, 1, 2, 3));
    EXPECT_THAT(g.axis_indices, ElementsAre(0, 1, 2, 3));
    EXPECT_EQ(g.my_index, p);
    EXPECT_EQ(CombinedAxisIndex(mesh, p, {"x"}), p);
    EXPECT_EQ(*GroupSize(mesh, p, {"x"}, {}), 4);
  }
  EXPECT_EQ(*CombinedAxisSize(mesh, {"x"}), 4);
  EXPECT_EQ(*CombinedAxisSize(mesh, {}), 1);
}

// Mesh {x:2, y:3}: position x*3 + y.
//   y=0 y=1 y=2
//    0   1   2    x=0
//    3   4   5    x=1
TEST(CollectiveGroupsTest, TwoDMeshOneAxis) {
  const Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  // Along x: the column of the device.
  CollectiveGroup g = Group(mesh, 4, {"x"});
  EXPECT_THAT(g.members, ElementsAre(1, 4));
  EXPECT_EQ(g.my_index, 1);
  EXPECT_THAT(Group(mesh, 2, {"x"}).members, ElementsAre(2, 5));
  EXPECT_EQ(Group(mesh, 2, {"x"}).my_index, 0);
  // Along y: the row of the device.
  g = Group(mesh, 4, {"y"});
  EXPECT_THAT(g.members, ElementsAre(3, 4, 5));
  EXPECT_EQ(g.my_index, 1);
  EXPECT_THAT(Group(mesh, 0, {"y"}).members, ElementsAre(0, 1, 2));
  EXPECT_EQ(*GroupSize(mesh, 4, {"x"}, {}), 2);
  EXPECT_EQ(*GroupSize(mesh, 4, {"y"}, {}), 3);
}

TEST(CollectiveGroupsTest, TupleAxesInBothOrders) {
  const Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  // (x, y): combined index x*3 + y, which is the mesh position.
  for (int64_t p = 0; p < 6; ++p) {
    CollectiveGroup g = Group(mesh, p, {"x", "y"});
    EXPECT_THAT(g.members, ElementsAre(0, 1, 2, 3, 4, 5));
    EXPECT_EQ(g.my_index, p);
    EXPECT_EQ(CombinedAxisIndex(mesh, p, {"x", "y"}), p);
  }
  // (y, x): combined index y*2 + x; index i is the device (x=i%2, y=i/2), at position
  // (i%2)*3 + i/2.
  const std::vector<int64_t> yx_order = {0, 3, 1, 4, 2, 5};
  for (int64_t i = 0; i < 6; ++i) {
    const int64_t p = yx_order[i];
    CollectiveGroup g = Group(mesh, p, {"y", "x"});
    EXPECT_THAT(g.members, ElementsAreArray(yx_order));
    EXPECT_THAT(g.axis_indices, ElementsAre(0, 1, 2, 3, 4, 5));
    EXPECT_EQ(g.my_index, i) << "position " << p;
    EXPECT_EQ(CombinedAxisIndex(mesh, p, {"y", "x"}), i);
  }
  EXPECT_EQ(*CombinedAxisSize(mesh, {"y", "x"}), 6);
}

// Mesh {x:2, y:2, z:2}: position x*4 + y*2 + z. Axes (z, x) leave y fixed.
TEST(CollectiveGroupsTest, TupleAxesSkippingAMeshAxis) {
  const Mesh mesh = MakeMesh({{"x", 2}, {"y", 2}, {"z", 2}});
  // Position 3 is (x=0, y=1, z=1); index z*2 + x = 2. Indices 0..3: (z,x) = (0,0) (0,1) (1,0)
  // (1,1), with y=1: positions 2, 6, 3, 7.
  CollectiveGroup g = Group(mesh, 3, {"z", "x"});
  EXPECT_THAT(g.members, ElementsAre(2, 6, 3, 7));
  EXPECT_EQ(g.my_index, 2);
  // (x, z): index x*2 + z: positions 2, 3, 6, 7.
  g = Group(mesh, 3, {"x", "z"});
  EXPECT_THAT(g.members, ElementsAre(2, 3, 6, 7));
  EXPECT_EQ(g.my_index, 1);
}

TEST(CollectiveGroupsTest, AxisIndexGroups) {
  const Mesh line = MakeMesh({{"x", 4}});
  const AxisGroups even_odd = MakeGroups({{0, 2}, {1, 3}});
  CollectiveGroup g = Group(line, 3, {"x"}, even_odd);
  EXPECT_THAT(g.members, ElementsAre(1, 3));
  EXPECT_THAT(g.axis_indices, ElementsAre(1, 3));
  EXPECT_EQ(g.my_index, 1);
  g = Group(line, 0, {"x"}, even_odd);
  EXPECT_THAT(g.members, ElementsAre(0, 2));
  EXPECT_EQ(g.my_index, 0);

  // Group order is the order of the entry, not of the ring.
  const Mesh square = MakeMesh({{"x", 2}, {"y", 2}});  // position x*2 + y
  const AxisGroups groups = MakeGroups({{0, 3}, {2, 1}});
  // (x, y): index = position. Position 1 is index 1, second in (2, 1).
  g = Group(square, 1, {"x", "y"}, groups);
  EXPECT_THAT(g.members, ElementsAre(2, 1));
  EXPECT_THAT(g.axis_indices, ElementsAre(2, 1));
  EXPECT_EQ(g.my_index, 1);
  // (y, x): index y*2 + x. Position 1 (x=0, y=1) is index 2, first in (2, 1); index 1 is
  // (x=1, y=0), position 2.
  g = Group(square, 1, {"y", "x"}, groups);
  EXPECT_THAT(g.members, ElementsAre(1, 2));
  EXPECT_THAT(g.axis_indices, ElementsAre(2, 1));
  EXPECT_EQ(g.my_index, 0);
  // Position 3 is index 3 in either order: with 0 (position 0).
  EXPECT_THAT(Group(square, 3, {"y", "x"}, groups).members, ElementsAre(0, 3));

  // Groups over one axis of a 2-D mesh: along y of {x:2, y:3}, groups (0) (2, 1).
  const Mesh rect = MakeMesh({{"x", 2}, {"y", 3}});
  const AxisGroups uneven = MakeGroups({{0}, {2, 1}});
  g = Group(rect, 4, {"y"}, uneven);  // (x=1, y=1)
  EXPECT_THAT(g.members, ElementsAre(5, 4));
  EXPECT_EQ(g.my_index, 1);
  EXPECT_THAT(Group(rect, 3, {"y"}, uneven).members, ElementsAre(3));
}

TEST(CollectiveGroupsTest, GroupSizeIsTheSizeOfTheGroup) {
  const Mesh rect = MakeMesh({{"x", 2}, {"y", 3}});
  const AxisGroups uneven = MakeGroups({{0}, {2, 1}});
  for (int64_t p = 0; p < 6; ++p) {
    for (const AxisList& axes : std::vector<AxisList>{{"x"}, {"y"}, {"x", "y"}, {"y", "x"}}) {
      EXPECT_EQ(*GroupSize(rect, p, axes, {}), Group(rect, p, axes).size());
    }
    EXPECT_EQ(*GroupSize(rect, p, {"y"}, uneven), Group(rect, p, {"y"}, uneven).size());
  }
  // No device chosen: the largest group.
  EXPECT_EQ(*GroupSize(rect, -1, {"y"}, uneven), 2);
  EXPECT_EQ(*GroupSize(rect, -1, {"y", "x"}, {}), 6);
}

TEST(CollectiveGroupsTest, Errors) {
  const Mesh mesh = MakeMesh({{"x", 2}, {"y", 2}});
  EXPECT_THAT(std::string(GroupOf(mesh, 0, {"z"}, {}).status().message()),
              HasSubstr("axis \"z\" is not in mesh {x:2, y:2}"));
  EXPECT_THAT(std::string(GroupSize(mesh, 0, {"x", "z"}, {}).status().message()),
              HasSubstr("axis \"z\" is not in mesh {x:2, y:2}"));
  EXPECT_THAT(std::string(CombinedAxisSize(mesh, {"x", "x"}).status().message()),
              HasSubstr("axis \"x\" is named twice"));
  EXPECT_THAT(std::string(GroupOf(mesh, 2, {"x"}, MakeGroups({{0}})).status().message()),
              HasSubstr("axis index 1 is in no axis_index_groups entry"));
  EXPECT_THAT(std::string(GroupOf(mesh, 0, {"x"}, MakeGroups({{0, 2}})).status().message()),
              HasSubstr("axis_index_groups index 2 is out of range for axis size 2"));
}

TEST(CollectiveGroupsTest, CheckAxisIndexGroups) {
  EXPECT_EQ(*CheckAxisIndexGroups({}, 4, true), 4);
  EXPECT_EQ(*CheckAxisIndexGroups(MakeGroups({{0, 3}, {2, 1}}), 4, true), 2);
  EXPECT_EQ(*CheckAxisIndexGroups(MakeGroups({{0}, {2, 1, 3}}), 4, false), 1);
  EXPECT_THAT(std::string(CheckAxisIndexGroups(MakeGroups({{0}, {2, 1, 3}}), 4, true)
                              .status()
                              .message()),
              HasSubstr("must all have the same size"));
  EXPECT_THAT(std::string(CheckAxisIndexGroups(MakeGroups({{0, 1}, {}}), 2, false)
                              .status()
                              .message()),
              HasSubstr("empty group"));
  EXPECT_THAT(
      std::string(CheckAxisIndexGroups(MakeGroups({{0, 1}, {1, 2}}), 4, true).status().message()),
      HasSubstr("cover all indices [0, 4) exactly once (index 1 appears 2 times)"));
  EXPECT_THAT(
      std::string(CheckAxisIndexGroups(MakeGroups({{0, 4}}), 4, false).status().message()),
      HasSubstr("index 4 is out of range for axis size 4"));
}

TEST(CollectiveGroupsTest, AttributesOfAnOp) {
  Op psum;
  psum.set_opcode("psum_start");
  psum.mutable_all_reduce()->add_axes("y");
  psum.mutable_all_reduce()->add_axes("x");
  *psum.mutable_all_reduce()->mutable_axis_index_groups() = MakeGroups({{0, 3}, {2, 1}});
  EXPECT_THAT(CollectiveAxes(psum), ElementsAre("y", "x"));
  EXPECT_EQ(CollectiveAxisGroups(psum).size(), 2);

  Op precv;
  precv.set_opcode("precv");
  precv.mutable_precv()->add_axes("x");
  EXPECT_THAT(CollectiveAxes(precv), ElementsAre("x"));
  EXPECT_TRUE(CollectiveAxisGroups(precv).empty());

  Op index;
  index.set_opcode("axis_index");
  SetAxisList({"x", "y"}, index.mutable_axis()->mutable_axes());
  EXPECT_THAT(CollectiveAxes(index), ElementsAre("x", "y"));
  EXPECT_EQ(ToAxisList(index.axis().axes()), (AxisList{"x", "y"}));

  Op neg;
  neg.set_opcode("neg");
  EXPECT_TRUE(CollectiveAxes(neg).empty());

  // The op overloads read the same attributes.
  const Mesh square = MakeMesh({{"x", 2}, {"y", 2}});
  EXPECT_THAT(GroupOf(square, 1, psum)->members, ElementsAre(1, 2));
  EXPECT_EQ(*GroupSize(square, 1, psum), 2);
}

// The shape rules take the group size from the same place: an untiled all_gather's new
// dimension is the size of every device's group.
TEST(CollectiveGroupsTest, ShapeRuleAgreesWithTheGroups) {
  const Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  struct Case {
    AxisList axes;
    std::vector<std::vector<int64_t>> groups;
  };
  const std::vector<Case> cases = {{{"x"}, {}},
                                   {{"y", "x"}, {}},
                                   {{"x", "y"}, {{0, 5}, {4, 1}, {2, 3}}},
                                   {{"y", "x"}, {{5, 4, 3}, {0, 1, 2}}}};
  for (const Case& c : cases) {
    Op op;
    op.set_opcode("all_gather");
    SetAxisList(c.axes, op.mutable_all_gather()->mutable_axes());
    *op.mutable_all_gather()->mutable_axis_index_groups() = MakeGroups(c.groups);
    ShapeContext ctx;
    ctx.mesh = &mesh;
    ctx.in_spmd = true;
    absl::StatusOr<std::vector<ShapedType>> types =
        InferResultTypes(ctx, {ShapedType{DType::kF32, {3}}}, op);
    ASSERT_TRUE(types.ok()) << types.status();
    for (int64_t p = 0; p < MeshSize(mesh); ++p) {
      EXPECT_EQ((*types)[0].dims[0], Group(mesh, p, c.axes, op.all_gather().axis_index_groups())
                                         .size());
    }
  }
}

}  // namespace
}  // namespace shardjit::ir
