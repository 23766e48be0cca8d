// Test support for the collective tests: an independent host oracle of the JAX collectives
// (computed in double precision from mesh coordinates, without using runtime/), and a runner
// that executes a shard_map body on every device and returns each device's result exactly.
#ifndef SHARDJIT_TESTS_COLLECTIVES_ORACLE_H_
#define SHARDJIT_TESTS_COLLECTIVES_ORACLE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"

namespace shardjit::collectives_test {

// ---------------------------------------------------------------------------------------------
// Host arrays
// ---------------------------------------------------------------------------------------------

// A dense row-major array of doubles.
struct HostArray {
  std::vector<int64_t> dims;
  std::vector<double> values;

  double at(const std::vector<int64_t>& index) const;
};

int64_t NumElements(const std::vector<int64_t>& dims);
std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims);
int64_t Ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims);
// An array of `dims` whose element at index i is f(i).
HostArray Generate(std::vector<int64_t> dims,
                   const std::function<double(const std::vector<int64_t>&)>& f);

// One array per mesh position (row-major position p).
using PerDevice = std::vector<HostArray>;
using Groups = std::vector<std::vector<int64_t>>;
using AxisList = std::vector<std::string>;

// Each value rounded to what `dtype` can hold (bf16 round-to-nearest-even, f32, s32).
PerDevice RoundTo(const PerDevice& arrays, DType dtype);

// ---------------------------------------------------------------------------------------------
// Mesh model: positions, coordinates and collective groups, from first principles
// ---------------------------------------------------------------------------------------------

class MeshModel {
 public:
  MeshModel() = default;
  explicit MeshModel(std::vector<std::pair<std::string, int64_t>> axes) : axes_(std::move(axes)) {}

  int64_t size() const;
  std::vector<std::string> names() const;
  // Row-major coordinates of position p (first axis major).
  std::vector<int64_t> Coords(int64_t position) const;
  // Size of the combined axis.
  int64_t AxisSize(const AxisList& axes) const;
  // Combined index of `position` along `axes` (x*size(y)+y for axes (x, y)).
  int64_t AxisIndex(int64_t position, const AxisList& axes) const;

  struct Group {
    std::vector<int64_t> members;  // positions in group order
    std::vector<int64_t> indices;  // combined axis index of each member
    int64_t my_index = 0;          // position of the device in `members`
  };
  // The devices that differ from `position` only along `axes`, narrowed to the entry of `groups`
  // holding its combined index (in that entry's order), or ordered by combined index.
  Group GroupOf(int64_t position, const AxisList& axes, const Groups& groups) const;

 private:
  int64_t AxisId(const std::string& name) const;
  std::vector<std::pair<std::string, int64_t>> axes_;
};

// ---------------------------------------------------------------------------------------------
// Expected results (jax.lax semantics)
// ---------------------------------------------------------------------------------------------

// kind: "psum", "pmean", "pmax" or "pmin".
PerDevice ExpectedReduce(const MeshModel& mesh, const PerDevice& in, const std::string& kind,
                         const AxisList& axes, const Groups& groups = {});
PerDevice ExpectedAllGather(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                            int64_t axis, bool tiled, const Groups& groups = {});
PerDevice ExpectedPsumScatter(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                              int64_t dim, bool tiled, const Groups& groups = {});
PerDevice ExpectedPpermute(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                           const std::vector<std::pair<int64_t, int64_t>>& perm);
PerDevice ExpectedAllToAll(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                           int64_t split, int64_t concat, bool tiled, const Groups& groups = {});
// ragged_all_to_all as JAX's docstring writes it: each receiver starts from its `output`; for
// every sender j and k < K/G, rows [input_offsets[i], +send_sizes[i]) of j's operand, i = (my
// group index) * K/G + k, land at j's output_offsets[i]. Assumes valid arguments.
struct RaggedArgs {
  PerDevice operand, output, input_offsets, send_sizes, output_offsets, recv_sizes;
};
PerDevice ExpectedRaggedAllToAll(const MeshModel& mesh, const RaggedArgs& args,
                                 const AxisList& axes, const Groups& groups = {});

// ---------------------------------------------------------------------------------------------
// Running on the library
// ---------------------------------------------------------------------------------------------

// A runtime with `num_devices` devices, shared by the tests of this binary.
Runtime& SharedRuntime(int num_devices);

// Distinct, mixed-sign inputs of `dims` for every position, exactly representable in `dtype`.
// Each device's values carry its position so that any mix-up shows.
PerDevice MakeInputs(const MeshModel& mesh, const std::vector<int64_t>& dims, DType dtype,
                     int seed = 0);

struct DeviceResults {
  std::vector<PerDevice> values;  // per result, per position
  std::vector<DType> dtypes;      // per result
};

// Runs `body` under jit(shard_map(...)) on `mesh`, device p receiving inputs[p] (all of one
// shape) as a tracer of that shape, and returns every device's value of each of the
// `num_results` results (the results are stacked over a leading mesh dimension so no device's
// block is lost). global_view: the shard_map is preceded by a global op (x * 1), so jit keeps a
// global-view program that runs the shard_map through the runtime's RunShardMap, instead of
// lowering the program to one per-device module.
absl::StatusOr<DeviceResults> RunPerDevice(const Mesh& mesh, DType dtype, const PerDevice& inputs,
                                           const std::function<std::vector<Tracer>(Tracer)>& body,
                                           int num_results, bool global_view = false);
// The same with several inputs, each of its own dtype (every device's arrays of one input share
// a shape).
absl::StatusOr<DeviceResults> RunPerDevice(
    const Mesh& mesh, const std::vector<std::pair<DType, PerDevice>>& inputs,
    const std::function<std::vector<Tracer>(const std::vector<Tracer>&)>& body, int num_results,
    bool global_view = false);

// ---------------------------------------------------------------------------------------------
// The meshes, axes and groups the collective tests run over
// ---------------------------------------------------------------------------------------------

struct MeshShape {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
};
void PrintTo(const MeshShape& m, std::ostream* os);
std::string MeshShapeName(const ::testing::TestParamInfo<MeshShape>& info);
// (1), (4), (2,2), (4,4), (2,4), (1,8), (8,8).
std::vector<MeshShape> TestMeshShapes();

// The axis names to run collectives over: the single axis of a 1-D mesh; each axis and the tuple
// in both orders on a 2-D mesh.
std::vector<AxisList> AxisSpecs(const MeshModel& mesh);
// axis_index_groups to try on a combined axis of size n: none; pairs, every other one listed in
// reverse ([[0,1],[3,2],...]); evens ascending and odds descending ([[0,2],[3,1]] for 4).
std::vector<Groups> GroupSets(int64_t n);

// A test over one of TestMeshShapes(): its model and its mesh on SharedRuntime(64).
class MeshTest : public ::testing::TestWithParam<MeshShape> {
 protected:
  void SetUp() override;
  MeshModel model_;
  std::optional<Mesh> mesh_;
};

// got and want agree in every device's shape and, elementwise, within abs_tol + rel_tol*|want|.
::testing::AssertionResult Matches(const PerDevice& got, const PerDevice& want, double rel_tol = 0,
                                   double abs_tol = 0);

std::string Describe(const AxisList& axes, const Groups& groups = {});

}  // namespace shardjit::collectives_test

#endif  // SHARDJIT_TESTS_COLLECTIVES_ORACLE_H_
