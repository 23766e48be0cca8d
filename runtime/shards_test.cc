// Host scatter and gather of sharded arrays (runtime/shards.h): blocks derived by hand on 1-D and
// 2-D meshes, tuple axes, replicated and trailing dims, and scatter-then-gather round trips.
#include "runtime/shards.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/sharding.h"
#include "runtime/device.h"

namespace shardjit::runtime {
namespace {

using ir::DType;
using ir::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Dims = std::vector<int64_t>;

ir::Mesh MakeMesh(const std::vector<std::pair<std::string, int64_t>>& axes) {
  ir::Mesh mesh;
  for (const auto& [name, size] : axes) {
    ir::MeshAxis* a = mesh.add_axes();
    a->set_name(name);
    a->set_size(size);
  }
  return mesh;
}

// One entry per dimension: the axes it is split over (empty: None).
ir::PartitionSpec MakeSpec(const std::vector<std::vector<std::string>>& dims) {
  ir::PartitionSpec spec;
  for (const std::vector<std::string>& axes : dims) {
    ir::DimSpec* d = spec.add_dims();
    for (const std::string& a : axes) d->add_axes(a);
  }
  return spec;
}

// 0, 1, 2, ... in row-major order.
Tensor Iota(Dims dims, DType dtype = DType::kF32) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<double>(i);
  return Tensor::FromDoubles({dtype, std::move(dims)}, values);
}

Tensor Shard(const Tensor& global, const ir::Mesh& mesh, const ir::PartitionSpec& spec,
             int64_t position) {
  absl::StatusOr<Tensor> shard = ShardOf(global, mesh, spec, position, nullptr, "test");
  EXPECT_TRUE(shard.ok()) << shard.status();
  return shard.ok() ? *std::move(shard) : Tensor();
}

std::vector<Tensor> ScatterAll(const Tensor& global, const ir::Mesh& mesh,
                               const ir::PartitionSpec& spec) {
  absl::StatusOr<std::vector<Tensor>> shards = ScatterShards(
      global, mesh, spec, [](int64_t) { return std::optional<ir::Allocator*>(nullptr); }, "test");
  EXPECT_TRUE(shards.ok()) << shards.status();
  return shards.ok() ? *std::move(shards) : std::vector<Tensor>();
}

TEST(ShardsTest, OneDimensionalMesh) {
  const ir::Mesh mesh = MakeMesh({{"x", 4}});
  // P(x) over f32[8]: position p holds elements 2p, 2p+1.
  const ir::PartitionSpec px = MakeSpec({{"x"}});
  const Tensor v = Iota({8});
  for (int64_t p = 0; p < 4; ++p) {
    EXPECT_EQ(BlockOffset(mesh, px, {2}, p), Dims{2 * p});
    const Tensor s = Shard(v, mesh, px, p);
    EXPECT_EQ(s.dims(), Dims{2});
    EXPECT_THAT(s.ToDoubles(), ElementsAre(2 * p, 2 * p + 1));
  }
  // P(None, x) over f32[2,8]: both rows, columns 2p..2p+1.
  const Tensor m = Iota({2, 8});
  const ir::PartitionSpec pnx = MakeSpec({{}, {"x"}});
  EXPECT_EQ(BlockOffset(mesh, pnx, {2, 2}, 3), (Dims{0, 6}));
  EXPECT_THAT(Shard(m, mesh, pnx, 1).ToDoubles(), ElementsAre(2, 3, 10, 11));
  // P(x) over f32[8,3]: the trailing dim, not in the spec, is whole.
  const Tensor t = Iota({8, 3});
  EXPECT_EQ(BlockOffset(mesh, px, {2, 3}, 2), (Dims{4, 0}));
  const Tensor s = Shard(t, mesh, px, 2);
  EXPECT_EQ(s.dims(), (Dims{2, 3}));
  EXPECT_THAT(s.ToDoubles(), ElementsAre(12, 13, 14, 15, 16, 17));
}

TEST(ShardsTest, TwoDimensionalMesh) {
  const ir::Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});  // position = 3x + y
  // P(x, y) over [4,6] (element r*6+c): position 4 = (1,1) holds rows 2..3, columns 2..3.
  const Tensor a = Iota({4, 6});
  const ir::PartitionSpec pxy = MakeSpec({{"x"}, {"y"}});
  EXPECT_EQ(BlockOffset(mesh, pxy, {2, 2}, 4), (Dims{2, 2}));
  EXPECT_THAT(Shard(a, mesh, pxy, 4).ToDoubles(), ElementsAre(14, 15, 20, 21));
  // Position 2 = (0,2): rows 0..1, columns 4..5.
  EXPECT_EQ(BlockOffset(mesh, pxy, {2, 2}, 2), (Dims{0, 4}));
  EXPECT_THAT(Shard(a, mesh, pxy, 2).ToDoubles(), ElementsAre(4, 5, 10, 11));
  // P(y, x) over [6,4] (element r*4+c): position 4 = (x=1, y=1) holds rows 2..3 (by y) and
  // columns 2..3 (by x).
  const Tensor b = Iota({6, 4});
  const ir::PartitionSpec pyx = MakeSpec({{"y"}, {"x"}});
  EXPECT_EQ(BlockOffset(mesh, pyx, {2, 2}, 4), (Dims{2, 2}));
  EXPECT_THAT(Shard(b, mesh, pyx, 4).ToDoubles(), ElementsAre(10, 11, 14, 15));
  // Position 5 = (x=1, y=2): rows 4..5, columns 2..3.
  EXPECT_THAT(Shard(b, mesh, pyx, 5).ToDoubles(), ElementsAre(18, 19, 22, 23));
}

TEST(ShardsTest, TupleAxesNumberBlocksMajorFirst) {
  const ir::Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  const Tensor v = Iota({12});
  // P((x, y)): block x*3 + y, which is the position.
  const ir::PartitionSpec xy = MakeSpec({{"x", "y"}});
  for (int64_t p = 0; p < 6; ++p) {
    EXPECT_EQ(BlockOffset(mesh, xy, {2}, p), Dims{2 * p});
    EXPECT_THAT(Shard(v, mesh, xy, p).ToDoubles(), ElementsAre(2 * p, 2 * p + 1));
  }
  // P((y, x)): block y*2 + x. Position 1 = (0,1): block 2; 3 = (1,0): block 1; 5 = (1,2): 5.
  const ir::PartitionSpec yx = MakeSpec({{"y", "x"}});
  EXPECT_EQ(BlockOffset(mesh, yx, {2}, 1), Dims{4});
  EXPECT_THAT(Shard(v, mesh, yx, 1).ToDoubles(), ElementsAre(4, 5));
  EXPECT_THAT(Shard(v, mesh, yx, 3).ToDoubles(), ElementsAre(2, 3));
  EXPECT_THAT(Shard(v, mesh, yx, 5).ToDoubles(), ElementsAre(10, 11));
  // A tuple over part of a 2-D array: P(None, (y, x)) over [2,12].
  const Tensor m = Iota({2, 12});
  EXPECT_THAT(Shard(m, mesh, MakeSpec({{}, {"y", "x"}}), 1).ToDoubles(),
              ElementsAre(4, 5, 16, 17));
}

TEST(ShardsTest, ReplicasOfABlockShareTheFirstHoldersBuffer) {
  const ir::Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  const Tensor v = Iota({6});
  const ir::PartitionSpec py = MakeSpec({{"y"}});
  std::vector<std::shared_ptr<AccountingAllocator>> devices;
  for (int p = 0; p < 6; ++p) devices.push_back(std::make_shared<AccountingAllocator>());
  // Positions 0 and 3 are in another process: 4 holds block 1 (with 1), 5 block 2 alone.
  absl::StatusOr<std::vector<Tensor>> shards = ScatterShards(
      v, mesh, py,
      [&](int64_t p) {
        return p % 3 == 0 ? std::nullopt : std::optional<ir::Allocator*>(devices[p].get());
      },
      "test");
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_FALSE((*shards)[0].defined());
  EXPECT_TRUE((*shards)[4].SharesStorageWith((*shards)[1]));
  EXPECT_TRUE((*shards)[5].SharesStorageWith((*shards)[2]));
  EXPECT_FALSE((*shards)[1].SharesStorageWith((*shards)[2]));
  EXPECT_THAT((*shards)[4].ToDoubles(), ElementsAre(2, 3));
  // The buffer is counted where it was allocated: on the first holder.
  for (int p : {1, 2}) EXPECT_EQ(devices[p]->stats().current_bytes, 2 * 4) << p;
  for (int p : {0, 3, 4, 5}) EXPECT_EQ(devices[p]->stats().current_bytes, 0) << p;
}

TEST(ShardsTest, ReplicatedAxesHoldTheSameBlockAndGatherReadsTheLowest) {
  const ir::Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  const Tensor v = Iota({6});
  // P(y): x is not named, so positions (0,y) and (1,y) hold the same block y.
  const ir::PartitionSpec py = MakeSpec({{"y"}});
  for (int64_t y = 0; y < 3; ++y) {
    EXPECT_EQ(BlockOffset(mesh, py, {2}, y), Dims{2 * y});
    EXPECT_EQ(BlockOffset(mesh, py, {2}, 3 + y), Dims{2 * y});
    EXPECT_EQ(Shard(v, mesh, py, y).ToDoubles(), Shard(v, mesh, py, 3 + y).ToDoubles());
  }
  // P(): every position holds the whole array.
  for (int64_t p = 0; p < 6; ++p) {
    EXPECT_EQ(BlockOffset(mesh, MakeSpec({}), {6}, p), Dims{0});
    EXPECT_EQ(Shard(v, mesh, MakeSpec({}), p).ToDoubles(), v.ToDoubles());
  }
  // Gather takes each block once, from the lowest position holding it.
  std::vector<Tensor> shards = ScatterAll(v, mesh, py);
  std::vector<ProcessGroup::Block> blocks = HeldBlocks(shards, mesh, py);
  ASSERT_EQ(blocks.size(), 3u);
  for (int64_t y = 0; y < 3; ++y) {
    EXPECT_EQ(blocks[y].offset, Dims{2 * y});
    EXPECT_EQ(blocks[y].data.data(), shards[y].data());  // position y, not 3 + y
  }
  // Make the replicas differ: the lower positions' values win.
  std::vector<Tensor> marked = shards;
  for (int64_t p = 3; p < 6; ++p) marked[p] = Tensor::FromDoubles(marked[p].type(), {-1, -1});
  absl::StatusOr<Assembled> got = AssembleFrom(marked, mesh, py, v.type(), "test");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->global.ToDoubles(), v.ToDoubles());
  // Without the lower positions, the upper replicas complete it.
  std::vector<Tensor> upper = shards;
  for (int64_t p = 0; p < 3; ++p) upper[p] = Tensor();
  got = AssembleFrom(upper, mesh, py, v.type(), "test");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->missing.empty());
  EXPECT_EQ(got->global.ToDoubles(), v.ToDoubles());
  // A block no position holds: both its positions are missing.
  std::vector<Tensor> holes = shards;
  holes[1] = holes[4] = Tensor();
  got = AssembleFrom(holes, mesh, py, v.type(), "test");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->missing, ElementsAre(1, 4));
}

TEST(ShardsTest, ScatterThenGatherRoundTrips) {
  const ir::Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}});
  const std::vector<ir::PartitionSpec> specs = {
      MakeSpec({}),           MakeSpec({{"x"}}),           MakeSpec({{"y"}}),
      MakeSpec({{"x"}, {"y"}}), MakeSpec({{"y"}, {"x"}}),  MakeSpec({{}, {"x"}}),
      MakeSpec({{"x", "y"}}), MakeSpec({{}, {"y", "x"}}), MakeSpec({{"x"}, {}}),
  };
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kS32}) {
    const Tensor global = Iota({6, 12}, dtype);
    for (const ir::PartitionSpec& spec : specs) {
      std::vector<Tensor> shards = ScatterAll(global, mesh, spec);
      ASSERT_EQ(shards.size(), 6u);
      absl::StatusOr<Assembled> back = AssembleFrom(shards, mesh, spec, global.type(), "test");
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(back->missing.empty());
      EXPECT_EQ(back->global.type(), global.type());
      EXPECT_EQ(back->global.ToDoubles(), global.ToDoubles()) << ir::SpecToString(spec);
    }
  }
  // A scalar, replicated.
  const Tensor scalar = Tensor::FromDoubles({DType::kF32, {}}, {2.5});
  std::vector<Tensor> shards = ScatterAll(scalar, mesh, MakeSpec({}));
  absl::StatusOr<Assembled> back = AssembleFrom(shards, mesh, MakeSpec({}), scalar.type(), "t");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->global.ToDoubles(), ElementsAre(2.5));
}

TEST(ShardsTest, ScatterSkipsPositionsHeldElsewhereAndChecksTheSpec) {
  const ir::Mesh mesh = MakeMesh({{"x", 2}, {"y", 2}});
  const Tensor v = Iota({4});
  absl::StatusOr<std::vector<Tensor>> shards = ScatterShards(
      v, mesh, MakeSpec({{"x"}}),
      [](int64_t p) { return p % 2 ? std::nullopt : std::optional<ir::Allocator*>(nullptr); },
      "test");
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_TRUE((*shards)[0].defined());
  EXPECT_FALSE((*shards)[1].defined());
  EXPECT_THAT((*shards)[2].ToDoubles(), ElementsAre(2, 3));
  // Specs are checked even where no position is held here.
  auto none = [](int64_t) { return std::optional<ir::Allocator*>(); };
  const Tensor odd = Iota({3, 4});
  EXPECT_THAT(std::string(ScatterShards(odd, mesh, MakeSpec({{"x"}}), none, "put").status()
                              .message()),
              HasSubstr("put: spec P(x) splits dim 0 (size 3) into 2 blocks"));
  EXPECT_THAT(std::string(ScatterShards(odd, mesh, MakeSpec({{"z"}}), none, "put").status()
                              .message()),
              HasSubstr("axis \"z\" of spec P(z) is not in mesh {x:2, y:2}"));
  EXPECT_THAT(std::string(ShardOf(Iota({2, 6}), mesh, MakeSpec({{}, {"x", "y"}}), 0, nullptr,
                                  "sm")
                              .status()
                              .message()),
              HasSubstr("sm: spec P(None, (x,y)) splits dim 1 (size 6) into 4 blocks"));
  EXPECT_THAT(std::string(AssembleFrom({}, mesh, MakeSpec({{"x"}}), odd.type(), "gather")
                              .status()
                              .message()),
              HasSubstr("gather: spec P(x) splits dim 0 (size 3)"));
}

TEST(ShardsTest, PlaceBlockRejectsBlocksThatDoNotFit) {
  Tensor global = Tensor::Zeros({DType::kF32, {4, 4}});
  EXPECT_TRUE(PlaceBlock({{2, 2}, Iota({2, 2})}, global).ok());
  EXPECT_THAT(global.ToDoubles(),
              ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 3));
  EXPECT_THAT(std::string(PlaceBlock({{3, 0}, Iota({2, 2})}, global).message()),
              HasSubstr("a block of f32[2,2] at [3,0] does not fit"));
  EXPECT_FALSE(PlaceBlock({{0, 0}, Iota({2, 2}, DType::kS32)}, global).ok());
  EXPECT_FALSE(PlaceBlock({{0}, Iota({2})}, global).ok());
  EXPECT_FALSE(PlaceBlock({{0, -1}, Iota({2, 2})}, global).ok());
  // A shard of the wrong size fails the gather instead of writing past the array.
  const ir::Mesh mesh = MakeMesh({{"x", 2}});
  EXPECT_THAT(std::string(AssembleFrom({Iota({2}), Iota({3})}, mesh, MakeSpec({{"x"}}),
                                       {DType::kF32, {4}}, "gather")
                              .status()
                              .message()),
              HasSubstr("gather: a block of f32[3] at [3] does not fit"));
}

}  // namespace
}  // namespace shardjit::runtime
