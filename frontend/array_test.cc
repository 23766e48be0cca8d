// Mesh, PartitionSpec, device_put and Array round trips, memory accounting and random arrays.
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/executable.h"
#include "backends/reference/evaluator.h"
#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/sharding.h"
#include "ir/types.h"
#include "runtime/device.h"
#include "runtime/shard_map_cache.h"

namespace shardjit {
namespace {

using ::testing::HasSubstr;

std::vector<double> Iota(int64_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i) * scale - 7.0;
  return v;
}

TEST(MeshTest, CreatesAndValidates) {
  Runtime rt({.num_devices = 8});
  absl::StatusOr<Mesh> mesh = make_mesh(rt, {{"x", 2}, {"y", 4}});
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(mesh->size(), 8);
  EXPECT_EQ(mesh->axis_size("y"), 4);
  EXPECT_EQ(mesh->to_string(), "{x:2, y:4}");
  EXPECT_THAT(std::string(make_mesh(rt, {{"x", 4}, {"y", 4}}).status().message()),
              HasSubstr("needs 16 distinct devices in [0, 8)"));
  EXPECT_THAT(std::string(make_mesh(rt, {{"x", 2}, {"x", 2}}).status().message()),
              HasSubstr("axis name \"x\" is empty or repeated"));
  EXPECT_THAT(std::string(make_mesh(rt, {{"x", 0}}).status().message()),
              HasSubstr("axis \"x\" has size 0"));
  // Sizes whose product overflows, or passes the device limit, fail before any device list is
  // made for them.
  EXPECT_THAT(std::string(make_mesh(rt, {{"x", int64_t{1} << 40}}).status().message()),
              HasSubstr("has more than 1048576 devices"));
  EXPECT_THAT(
      std::string(
          make_mesh(rt, {{"x", int64_t{1} << 32}, {"y", int64_t{1} << 32}}).status().message()),
      HasSubstr("has more than 1048576 devices"));
  absl::StatusOr<Mesh> custom = make_mesh(rt, {{"i", 2}}, {5, 3});
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ(custom->proto().device_ids(0), 5);
}

TEST(MeshTest, EqualityComparesAxesDevicesAndRuntime) {
  Runtime rt({.num_devices = 8});
  Runtime other({.num_devices = 8});
  const Mesh m = *make_mesh(rt, {{"x", 2}, {"y", 4}});
  EXPECT_EQ(m, *make_mesh(rt, {{"x", 2}, {"y", 4}}));
  EXPECT_EQ(m, *make_mesh(rt, {{"x", 2}, {"y", 4}}, {0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(m == *make_mesh(rt, {{"x", 2}, {"z", 4}}));  // a name
  EXPECT_FALSE(m == *make_mesh(rt, {{"x", 4}, {"y", 2}}));  // sizes
  EXPECT_FALSE(m == *make_mesh(rt, {{"y", 4}, {"x", 2}}));  // order
  EXPECT_FALSE(m == *make_mesh(rt, {{"x", 2}, {"y", 4}}, {1, 0, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(m == *make_mesh(rt, {{"x", 8}}));               // axis count
  EXPECT_FALSE(m == *make_mesh(other, {{"x", 2}, {"y", 4}}));  // runtime
  // The protos alone: an empty device list is not the identity list.
  ir::Mesh a = m.proto();
  ir::Mesh b = a;
  EXPECT_TRUE(ir::MeshesEqual(a, b));
  b.clear_device_ids();
  EXPECT_FALSE(ir::MeshesEqual(a, b));
  a.clear_device_ids();
  EXPECT_TRUE(ir::MeshesEqual(a, b));
  // Copies share the proto and stay equal to the original.
  const Mesh copy = m;
  EXPECT_EQ(&copy.proto(), &m.proto());
  EXPECT_EQ(copy, m);
}

// A mesh refers to its runtime without keeping it alive: once the runtime is destroyed, what
// needs it fails with FailedPrecondition instead of reading a dangling reference.
TEST(MeshTest, UseAfterItsRuntimeIsDestroyedIsAnError) {
  auto f = jit([](Tracer x) { return x + 1.0; });
  const Tensor host = HostTensor(DType::kF32, {4}, {1, 2, 3, 4});
  std::optional<Mesh> mesh;
  std::optional<Array> a;
  {
    Runtime rt({.num_devices = 2});
    absl::StatusOr<Mesh> m = make_mesh(rt, {{"x", 2}});
    ASSERT_TRUE(m.ok()) << m.status();
    mesh = *m;
    absl::StatusOr<Array> put = device_put(host, NamedSharding(*mesh, P("x")));
    ASSERT_TRUE(put.ok()) << put.status();
    a = *put;
    ASSERT_TRUE(mesh->runtime().ok());
    ASSERT_TRUE(f(*a).ok());  // compiled and cached for rt
  }
  absl::StatusOr<Runtime*> rt = mesh->runtime();
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rt.status().message(), HasSubstr("was destroyed"));
  absl::StatusOr<Array> put = device_put(host, NamedSharding(*mesh, P("x")));
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition) << put.status();
  // The cached program and a new trace both find the runtime gone.
  absl::StatusOr<Array> out = f(*a);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  absl::StatusOr<Array> traced = jit([](Tracer x) { return x * 2.0; })(*a);
  EXPECT_EQ(traced.status().code(), absl::StatusCode::kFailedPrecondition) << traced.status();
  // The array's memory outlives the runtime: its data is still readable.
  absl::StatusOr<Tensor> back = a->to_host();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToDoubles(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(PartitionSpecTest, EqualityIgnoresTrailingReplicatedDims) {
  EXPECT_EQ(P(), P(None));
  EXPECT_EQ(P("x"), P("x", None));
  EXPECT_EQ(P("x", None, None), P("x"));
  EXPECT_EQ(P(Axes{"x", "y"}, None), P(Axes{"x", "y"}));
  EXPECT_FALSE(P("x") == P("y"));
  EXPECT_FALSE(P("x") == P());
  EXPECT_FALSE(P() == P(None, "x"));
  EXPECT_FALSE(P(None, "x") == P("x"));
  EXPECT_FALSE(P("x", None, "y") == P("x"));
  EXPECT_FALSE(P(Axes{"x", "y"}) == P("x", "y"));
  EXPECT_FALSE(P(Axes{"x", "y"}) == P(Axes{"y", "x"}));
  EXPECT_FALSE(P(Axes{"x", "y"}) == P("x"));
}

TEST(PartitionSpecTest, PrintsAndCompares) {
  EXPECT_EQ(P("x", None).to_string(), "P(x, None)");
  EXPECT_EQ(P(Axes{"x", "y"}, None).to_string(), "P((x,y), None)");
  EXPECT_EQ(P("x"), P("x", None));
  EXPECT_FALSE(P("x") == P(None, "x"));
}

class DevicePutTest : public ::testing::TestWithParam<DType> {};

TEST_P(DevicePutTest, EveryShardingRoundTripsAndBlocksAreRight) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  const DType dtype = GetParam();
  Tensor host = HostTensor(dtype, {4, 8}, Iota(32, dtype == DType::kS32 ? 1.0 : 0.5));
  std::vector<PartitionSpec> specs = {P("x", "y"), P("y", "x"), P("x", None), P(None, "y"),
                                      P(Axes{"x", "y"}, None), P(None, Axes{"y", "x"}), P()};
  for (const PartitionSpec& from : specs) {
    absl::StatusOr<Array> a = device_put(host, NamedSharding(mesh, from));
    ASSERT_TRUE(a.ok()) << a.status();
    for (const PartitionSpec& to : specs) {
      absl::StatusOr<Array> b = device_put(*a, NamedSharding(mesh, to));
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->to_host()->ToDoubles(), host.ToDoubles())
          << from.to_string() << " -> " << to.to_string();
    }
  }
  // P(x, y): device at mesh position (1, 0) holds rows 2..3, columns 0..2.
  Array a = *device_put(host, NamedSharding(mesh, P("x", "y")));
  const Tensor& block = a.shards()[2];
  EXPECT_EQ(block.dims(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(block.GetDouble(0), host.GetDouble(2 * 8 + 0));
  EXPECT_EQ(block.GetDouble(7), host.GetDouble(3 * 8 + 3));
  // P((x,y)): the combined axis splits rows into 4 blocks in x-major order.
  Array c = *device_put(host, NamedSharding(mesh, P(Axes{"x", "y"})));
  EXPECT_EQ(c.shards()[1].GetDouble(0), host.GetDouble(1 * 8));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DevicePutTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kS32, DType::kPred));

TEST(DevicePutTest, RejectsSpecsThatDoNotDivideOrNameUnknownAxes) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  Tensor host = HostTensor(DType::kF32, {3, 4}, {0});
  EXPECT_THAT(std::string(device_put(host, NamedSharding(mesh, P("x"))).status().message()),
              HasSubstr("device_put of f32[3,4]: spec P(x) splits dim 0 (size 3) into 2 blocks"));
  EXPECT_THAT(std::string(device_put(host, NamedSharding(mesh, P("z"))).status().message()),
              HasSubstr("axis \"z\" of spec P(z) is not in mesh {x:2, y:2}"));
  EXPECT_THAT(std::string(device_put(host, NamedSharding(mesh, P("x", "x"))).status().message()),
              HasSubstr("uses axis \"x\" twice"));
  EXPECT_THAT(
      std::string(device_put(host, NamedSharding(mesh, P(None, None, "y"))).status().message()),
      HasSubstr("has 3 entries for an array of rank 2"));
}

// A shard_map body that records the blocks each device is handed (by the device's allocator)
// and returns them unchanged.
class RecordingBody final : public backends::Executable {
 public:
  RecordingBody(std::mutex& mu, std::map<const ir::Allocator*, std::vector<Tensor>>& seen)
      : mu_(mu), seen_(seen) {}
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& args,
                                          backends::DeviceContext& device) const override {
    std::lock_guard<std::mutex> lock(mu_);
    seen_[device.allocator()] = args;
    return args;
  }
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }
  const ir::Function* function() const override { return &function_; }

 private:
  std::mutex& mu_;
  std::map<const ir::Allocator*, std::vector<Tensor>>& seen_;
  ir::Function function_;
};

// A global-view program of one shard_map op over its arguments.
class ShardMapProgram final : public backends::Executable {
 public:
  explicit ShardMapProgram(ir::Op op) : op_(std::move(op)) {}
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& args,
                                          backends::DeviceContext& device) const override {
    return device.RunShardMap(op_, args);
  }
  const backends::Backend& backend() const override {
    return backends::reference::ReferenceBackend();
  }

 private:
  ir::Op op_;
};

// device_put and the runtime's shard_map fan-out split an array the same way (one mechanism:
// runtime/shards.h): the block device_put keeps for each mesh position is the block a shard_map
// body on that position's device is handed, and the runtime assembles the blocks back.
TEST(DevicePutTest, ShardsAreTheBlocksAShardMapIsHanded) {
  Runtime rt({.num_devices = 6});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 3}}, {4, 2, 0, 5, 3, 1});
  Tensor host = HostTensor(DType::kF32, {6, 12}, Iota(72));
  for (const PartitionSpec& spec :
       {P("x", "y"), P("y", "x"), P("x"), P(None, "y"), P(Axes{"x", "y"}), P(None, Axes{"y", "x"}),
        P()}) {
    Array put = *device_put(host, NamedSharding(mesh, spec));
    ir::Op op;
    op.set_opcode("shard_map");
    *op.mutable_shard_map()->add_in_specs() = spec.proto();
    *op.mutable_shard_map()->add_out_specs() = spec.proto();
    op.add_results(1);
    *op.add_result_types() = ir::ToProto(host.type());
    std::mutex mu;
    std::map<const ir::Allocator*, std::vector<Tensor>> seen;
    Runtime::ShardMapCache cache;
    runtime::CompileFn compile = [&](const ir::Function&)
        -> absl::StatusOr<std::unique_ptr<backends::Executable>> {
      return std::make_unique<RecordingBody>(mu, seen);
    };
    absl::StatusOr<std::vector<Tensor>> out =
        rt.RunGlobal(mesh.proto(), ShardMapProgram(op), {host}, compile, cache);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].ToDoubles(), host.ToDoubles()) << spec.to_string();
    ASSERT_EQ(seen.size(), 6u);
    for (int64_t p = 0; p < mesh.size(); ++p) {
      const std::vector<Tensor>& handed =
          seen[rt.device(static_cast<int>(mesh.proto().device_ids(p))).allocator()];
      ASSERT_EQ(handed.size(), 1u);
      EXPECT_EQ(handed[0].type(), put.shards()[p].type()) << spec.to_string() << " position " << p;
      EXPECT_EQ(handed[0].ToDoubles(), put.shards()[p].ToDoubles())
          << spec.to_string() << " position " << p;
    }
  }
}

TEST(MemoryTest, DevicesAccountTheirBlocks) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  int64_t before = rt.memory(1).current_bytes;
  {
    Array a = *device_put(HostTensor(DType::kF32, {8, 4}, {1}), NamedSharding(mesh, P("x")));
    EXPECT_EQ(rt.memory(1).current_bytes - before, 4 * 4 * 4);
    EXPECT_GE(rt.memory(1).peak_bytes, rt.memory(1).current_bytes);
  }
  EXPECT_EQ(rt.memory(1).current_bytes, before);
}

TEST(RandomTest, NormalIsDeterministicAndStandard) {
  Tensor a = *random::normal(random::key(7), {100000});
  Tensor b = *random::normal(random::key(7), {100000});
  Tensor c = *random::normal(random::key(8), {100000});
  EXPECT_EQ(a.ToDoubles(), b.ToDoubles());
  EXPECT_NE(a.ToDoubles(), c.ToDoubles());
  double mean = 0, sq = 0;
  for (double v : a.ToDoubles()) {
    mean += v;
    sq += v * v;
  }
  mean /= 100000;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / 100000 - mean * mean), 1.0, 0.02);
  Tensor u = *random::uniform(random::key(1), {1000}, DType::kF32, -2, 3);
  for (double v : u.ToDoubles()) {
    EXPECT_GE(v, -2);
    EXPECT_LT(v, 3);
  }
  EXPECT_THAT(std::string(random::normal(random::key(1), {2}, DType::kS32).status().message()),
              HasSubstr("random::normal: dtype must be floating (f16, bf16, f32, f64), got s32"));
}

}  // namespace
}  // namespace shardjit

namespace shardjit {
namespace {

// Devices holding the same block share its buffer, counted on the first of them; a program that
// writes into its operand on every device (dynamic_update_slice, which writes in place into a
// buffer only it holds) leaves the array and the other replicas as they were.
TEST(MemoryTest, ReplicasShareTheirBlockAndProgramsDoNotWriteIntoIt) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  std::vector<int64_t> before;
  for (int d = 0; d < 4; ++d) before.push_back(rt.memory(d).current_bytes);
  Array w = *device_put(HostTensor(DType::kF32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
                        NamedSharding(mesh, P(None, "y")));
  EXPECT_TRUE(w.shards()[0].SharesStorageWith(w.shards()[2]));  // (0,0) and (1,0): block y=0
  EXPECT_FALSE(w.shards()[0].SharesStorageWith(w.shards()[1]));
  for (int d : {0, 1}) EXPECT_EQ(rt.memory(d).current_bytes - before[d], 2 * 2 * 4) << d;
  for (int d : {2, 3}) EXPECT_EQ(rt.memory(d).current_bytes, before[d]) << d;
  for (Backend backend : {Backend::kX86, Backend::kReference}) {
    // Each device writes its x index into element (0, 0) of its copy of the block.
    auto marked = jit(shard_map(
                          [](Tracer b) {
                            Tracer x = lax::convert_element_type(lax::axis_index("x"),
                                                                 DType::kF32);
                            return lax::dynamic_update_slice(
                                b, lax::reshape(x + 100.0, {1, 1}), {0, 0});
                          },
                          mesh, {P(None, "y")}, {P("x", "y")}),
                      {.backend = backend});
    absl::StatusOr<Array> out = marked(w);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->to_host()->ToDoubles(),
              (std::vector<double>{100, 2, 100, 4, 5, 6, 7, 8, 101, 2, 101, 4, 5, 6, 7, 8}));
    for (int p = 0; p < 4; ++p) {
      EXPECT_EQ(w.shards()[p].ToDoubles()[0], p % 2 == 0 ? 1 : 3) << p;
    }
  }
}

TEST(MemoryTest, ArraysMayOutliveTheirRuntime) {
  std::optional<Array> kept;
  {
    Runtime rt({.num_devices = 2});
    Mesh mesh = *make_mesh(rt, {{"x", 2}});
    kept = *device_put(HostTensor(DType::kF32, {4}, {1, 2, 3, 4}), NamedSharding(mesh, P("x")));
  }
  EXPECT_EQ(kept->shards()[1].ToDoubles(), (std::vector<double>{3, 4}));
  kept.reset();
}

}  // namespace
}  // namespace shardjit
