// Values of every collective (psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute,
// all_to_all, axis_index, axis_size) on every device, checked against the host oracle of
// tests/collectives_oracle.h over meshes (1), (4), (2,2), (4,4), (2,4), (1,8), single and tuple
// axes in both orders, axis_index_groups (contiguous and interleaved), dtypes f32/bf16/s32,
// odd block sizes and rank-3 operands. The JAX docstring examples, targeted cases and the
// 64-device run are in collectives_examples_test.cc.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "frontend/shardjit.h"
#include "gtest/gtest.h"
#include "tests/collectives_oracle.h"

namespace shardjit::collectives_test {
namespace {

constexpr double kF32Rel = 1e-6;
// One bf16 ulp is at most 2^-7 of the value.
constexpr double kBF16Rel = 1.0 / 128;

class CollectivesTest : public MeshTest {
 protected:
  std::vector<AxisList> AxisSpecs() const { return collectives_test::AxisSpecs(model_); }

  static int64_t GroupSize(int64_t n, const Groups& groups) {
    return groups.empty() ? n : static_cast<int64_t>(groups[0].size());
  }

  absl::StatusOr<DeviceResults> Run(DType dtype, const PerDevice& inputs,
                                    const std::function<std::vector<Tracer>(Tracer)>& body,
                                    int num_results) {
    return RunPerDevice(*mesh_, dtype, inputs, body, num_results);
  }
};

// ---------------------------------------------------------------------------------------------
// All-reduce: psum, pmean, pmax, pmin
// ---------------------------------------------------------------------------------------------

TEST_P(CollectivesTest, ReductionsF32) {
  const PerDevice in = MakeInputs(model_, {3, 5}, DType::kF32);
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      absl::StatusOr<DeviceResults> out = Run(
          DType::kF32, in,
          [&](Tracer x) {
            return std::vector<Tracer>{lax::psum(x, axes, groups), lax::pmean(x, axes, groups),
                                       lax::pmax(x, axes, groups), lax::pmin(x, axes, groups)};
          },
          4);
      ASSERT_TRUE(out.ok()) << out.status();
      for (DType d : out->dtypes) EXPECT_EQ(d, DType::kF32);
      const std::vector<std::string> kinds = {"psum", "pmean", "pmax", "pmin"};
      for (size_t k = 0; k < kinds.size(); ++k) {
        PerDevice want = RoundTo(ExpectedReduce(model_, in, kinds[k], axes, groups), DType::kF32);
        EXPECT_TRUE(Matches(out->values[k], want, kF32Rel)) << kinds[k];
      }
    }
  }
}

TEST_P(CollectivesTest, ReductionsS32) {
  const PerDevice in = MakeInputs(model_, {3, 5}, DType::kS32);
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      absl::StatusOr<DeviceResults> out = Run(
          DType::kS32, in,
          [&](Tracer x) {
            return std::vector<Tracer>{lax::psum(x, axes, groups), lax::pmax(x, axes, groups),
                                       lax::pmin(x, axes, groups), lax::pmean(x, axes, groups)};
          },
          4);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->dtypes[0], DType::kS32);
      EXPECT_EQ(out->dtypes[1], DType::kS32);
      EXPECT_EQ(out->dtypes[2], DType::kS32);
      // pmean divides like true division: s32 gives f32.
      EXPECT_EQ(out->dtypes[3], DType::kF32);
      EXPECT_TRUE(Matches(out->values[0], ExpectedReduce(model_, in, "psum", axes, groups)));
      EXPECT_TRUE(Matches(out->values[1], ExpectedReduce(model_, in, "pmax", axes, groups)));
      EXPECT_TRUE(Matches(out->values[2], ExpectedReduce(model_, in, "pmin", axes, groups)));
      EXPECT_TRUE(
          Matches(out->values[3], ExpectedReduce(model_, in, "pmean", axes, groups), kF32Rel));
    }
  }
}

TEST_P(CollectivesTest, ReductionsBF16) {
  const PerDevice in = MakeInputs(model_, {3, 5}, DType::kBF16);
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      absl::StatusOr<DeviceResults> out = Run(
          DType::kBF16, in,
          [&](Tracer x) {
            return std::vector<Tracer>{lax::psum(x, axes, groups), lax::pmean(x, axes, groups),
                                       lax::pmax(x, axes, groups), lax::pmin(x, axes, groups)};
          },
          4);
      ASSERT_TRUE(out.ok()) << out.status();
      for (DType d : out->dtypes) EXPECT_EQ(d, DType::kBF16);
      const std::vector<std::string> kinds = {"psum", "pmean", "pmax", "pmin"};
      for (size_t k = 0; k < kinds.size(); ++k) {
        // Exact in double, compared within one bf16 ulp.
        PerDevice want = ExpectedReduce(model_, in, kinds[k], axes, groups);
        EXPECT_TRUE(Matches(out->values[k], want, kBF16Rel, 1e-6)) << kinds[k];
        // max and min pick an input: exact.
        if (kinds[k] == "pmax" || kinds[k] == "pmin") {
          EXPECT_TRUE(Matches(out->values[k], want)) << kinds[k];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// all_gather
// ---------------------------------------------------------------------------------------------

TEST_P(CollectivesTest, AllGather) {
  // An odd 3x5 block: untiled at every position 0..2, tiled along both dimensions.
  const PerDevice in = MakeInputs(model_, {3, 5}, DType::kF32);
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      absl::StatusOr<DeviceResults> out = Run(
          DType::kF32, in,
          [&](Tracer x) {
            return std::vector<Tracer>{lax::all_gather(x, axes, 0, false, groups),
                                       lax::all_gather(x, axes, 1, false, groups),
                                       lax::all_gather(x, axes, 2, false, groups),
                                       lax::all_gather(x, axes, 0, true, groups),
                                       lax::all_gather(x, axes, 1, true, groups)};
          },
          5);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_TRUE(Matches(out->values[0], ExpectedAllGather(model_, in, axes, 0, false, groups)))
          << "untiled axis 0";
      EXPECT_TRUE(Matches(out->values[1], ExpectedAllGather(model_, in, axes, 1, false, groups)))
          << "untiled axis 1";
      EXPECT_TRUE(Matches(out->values[2], ExpectedAllGather(model_, in, axes, 2, false, groups)))
          << "untiled axis 2";
      EXPECT_TRUE(Matches(out->values[3], ExpectedAllGather(model_, in, axes, 0, true, groups)))
          << "tiled axis 0";
      EXPECT_TRUE(Matches(out->values[4], ExpectedAllGather(model_, in, axes, 1, true, groups)))
          << "tiled axis 1";
    }
  }
}

TEST_P(CollectivesTest, AllGatherRank3S32) {
  const PerDevice in = MakeInputs(model_, {2, 3, 2}, DType::kS32);
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      absl::StatusOr<DeviceResults> out = Run(
          DType::kS32, in,
          [&](Tracer x) {
            return std::vector<Tracer>{lax::all_gather(x, axes, 3, false, groups),
                                       lax::all_gather(x, axes, 1, true, groups),
                                       lax::all_gather(x, axes, 2, true, groups)};
          },
          3);
      ASSERT_TRUE(out.ok()) << out.status();
      for (DType d : out->dtypes) EXPECT_EQ(d, DType::kS32);
      EXPECT_TRUE(Matches(out->values[0], ExpectedAllGather(model_, in, axes, 3, false, groups)));
      EXPECT_TRUE(Matches(out->values[1], ExpectedAllGather(model_, in, axes, 1, true, groups)));
      EXPECT_TRUE(Matches(out->values[2], ExpectedAllGather(model_, in, axes, 2, true, groups)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// psum_scatter
// ---------------------------------------------------------------------------------------------

struct ScatterCase {
  bool tiled;
  int64_t dim;
};

TEST_P(CollectivesTest, PsumScatter) {
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      const int64_t g = GroupSize(model_.AxisSize(axes), groups);
      // Input shapes (in terms of the group size g) and the scatters each is run with.
      const std::vector<std::pair<std::vector<int64_t>, std::vector<ScatterCase>>> table = {
          {{g, g}, {{false, 0}, {false, 1}, {true, 0}, {true, 1}}},
          {{2, g, 3}, {{false, 1}}},
          {{2 * g, 5}, {{true, 0}}},
          {{5, 3 * g}, {{true, 1}}},
          {{2, 3, 2 * g}, {{true, 2}}},
      };
      for (const auto& [dims, cases] : table) {
        const PerDevice in = MakeInputs(model_, dims, DType::kF32, static_cast<int>(dims[0]));
        absl::StatusOr<DeviceResults> out = Run(
            DType::kF32, in,
            [&](Tracer x) {
              std::vector<Tracer> r;
              for (const ScatterCase& c : cases)
                r.push_back(lax::psum_scatter(x, axes, c.dim, c.tiled, groups));
              return r;
            },
            static_cast<int>(cases.size()));
        ASSERT_TRUE(out.ok()) << out.status();
        for (size_t k = 0; k < cases.size(); ++k) {
          PerDevice want =
              RoundTo(ExpectedPsumScatter(model_, in, axes, cases[k].dim, cases[k].tiled, groups),
                      DType::kF32);
          EXPECT_TRUE(Matches(out->values[k], want, kF32Rel))
              << "input [" << absl::StrJoin(dims, ",") << "] scatter_dimension=" << cases[k].dim
              << " tiled=" << cases[k].tiled;
        }
      }
    }
  }
}

TEST_P(CollectivesTest, PsumScatterBF16) {
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    SCOPED_TRACE(Describe(axes));
    const PerDevice in = MakeInputs(model_, {2 * n, 3}, DType::kBF16);
    absl::StatusOr<DeviceResults> out = Run(
        DType::kBF16, in,
        [&](Tracer x) { return std::vector<Tracer>{lax::psum_scatter(x, axes, 0, true)}; }, 1);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtypes[0], DType::kBF16);
    EXPECT_TRUE(
        Matches(out->values[0], ExpectedPsumScatter(model_, in, axes, 0, true), kBF16Rel, 1e-6));
  }
}

// ---------------------------------------------------------------------------------------------
// ppermute
// ---------------------------------------------------------------------------------------------

TEST_P(CollectivesTest, Ppermute) {
  const PerDevice in = MakeInputs(model_, {3, 5}, DType::kF32);
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    SCOPED_TRACE(Describe(axes));
    std::vector<std::pair<int64_t, int64_t>> ring, partial;
    for (int64_t i = 0; i < n; ++i) ring.push_back({i, (i + 1) % n});
    // Sources 0, 2, 4, ... send to 1, 3, 5, ...; with n >= 4 the last also sends to 0: the
    // remaining even indices are no target and get zeros.
    for (int64_t i = 0; i + 1 < n; i += 2) partial.push_back({i, i + 1});
    if (n >= 4 && n % 2 == 0) partial.push_back({n - 1, 0});
    std::vector<std::pair<int64_t, int64_t>> reverse;
    for (int64_t i = 0; i < n; ++i) reverse.push_back({i, n - 1 - i});
    absl::StatusOr<DeviceResults> out = Run(
        DType::kF32, in,
        [&](Tracer x) {
          return std::vector<Tracer>{lax::ppermute(x, axes, ring), lax::ppermute(x, axes, partial),
                                     lax::ppermute(x, axes, reverse)};
        },
        3);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(Matches(out->values[0], ExpectedPpermute(model_, in, axes, ring))) << "ring";
    EXPECT_TRUE(Matches(out->values[1], ExpectedPpermute(model_, in, axes, partial))) << "partial";
    EXPECT_TRUE(Matches(out->values[2], ExpectedPpermute(model_, in, axes, reverse))) << "reverse";
  }
}

TEST_P(CollectivesTest, PpermuteS32PartialGivesZeros) {
  const PerDevice in = MakeInputs(model_, {2, 3, 2}, DType::kS32);
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    SCOPED_TRACE(Describe(axes));
    // Only index n-1 receives (from 0); everyone else gets zeros.
    std::vector<std::pair<int64_t, int64_t>> perm = {{0, n - 1}};
    absl::StatusOr<DeviceResults> out = Run(
        DType::kS32, in,
        [&](Tracer x) { return std::vector<Tracer>{lax::ppermute(x, axes, perm)}; }, 1);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtypes[0], DType::kS32);
    EXPECT_TRUE(Matches(out->values[0], ExpectedPpermute(model_, in, axes, perm)));
  }
}

// ---------------------------------------------------------------------------------------------
// all_to_all
// ---------------------------------------------------------------------------------------------

struct AllToAllCase {
  int64_t split;
  int64_t concat;
};

TEST_P(CollectivesTest, AllToAll) {
  for (const AxisList& axes : AxisSpecs()) {
    for (const Groups& groups : GroupSets(model_.AxisSize(axes))) {
      SCOPED_TRACE(Describe(axes, groups));
      const int64_t g = GroupSize(model_.AxisSize(axes), groups);
      struct Row {
        std::vector<int64_t> dims;
        bool tiled;
        std::vector<AllToAllCase> cases;
      };
      const std::vector<Row> table = {
          // Tiled: split < concat, split == concat, split > concat, rank 3.
          {{2 * g, 3}, true, {{0, 1}, {0, 0}}},
          {{3, 2 * g}, true, {{1, 0}, {1, 1}}},
          {{2, 3 * g, 2}, true, {{1, 2}, {1, 0}, {1, 1}}},
          // Untiled: the split dimension has the group size.
          {{g, 3}, false, {{0, 1}, {0, 0}}},
          {{3, g}, false, {{1, 0}, {1, 1}}},
          {{2, g, 3}, false, {{1, 2}, {1, 0}, {1, 1}}},
          {{g, 2, 3}, false, {{0, 2}, {0, 1}}},
          {{2, 3, g}, false, {{2, 0}}},
      };
      for (const Row& row : table) {
        const PerDevice in =
            MakeInputs(model_, row.dims, DType::kF32, static_cast<int>(row.dims[1]));
        absl::StatusOr<DeviceResults> out = Run(
            DType::kF32, in,
            [&](Tracer x) {
              std::vector<Tracer> r;
              for (const AllToAllCase& c : row.cases) {
                r.push_back(lax::all_to_all(x, axes, c.split, c.concat, row.tiled, groups));
              }
              return r;
            },
            static_cast<int>(row.cases.size()));
        ASSERT_TRUE(out.ok()) << out.status();
        for (size_t k = 0; k < row.cases.size(); ++k) {
          const AllToAllCase& c = row.cases[k];
          EXPECT_TRUE(Matches(out->values[k], ExpectedAllToAll(model_, in, axes, c.split, c.concat,
                                                               row.tiled, groups)))
              << "input [" << absl::StrJoin(row.dims, ",") << "] split_axis=" << c.split
              << " concat_axis=" << c.concat << " tiled=" << row.tiled;
        }
      }
    }
  }
}

TEST_P(CollectivesTest, AllToAllBF16) {
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    SCOPED_TRACE(Describe(axes));
    const PerDevice in = MakeInputs(model_, {n, 3}, DType::kBF16);
    absl::StatusOr<DeviceResults> out = Run(
        DType::kBF16, in,
        [&](Tracer x) { return std::vector<Tracer>{lax::all_to_all(x, axes, 0, 1, false)}; }, 1);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtypes[0], DType::kBF16);
    EXPECT_TRUE(Matches(out->values[0], ExpectedAllToAll(model_, in, axes, 0, 1, false)));
  }
}

// ---------------------------------------------------------------------------------------------
// axis_index, axis_size
// ---------------------------------------------------------------------------------------------

TEST_P(CollectivesTest, AxisIndexAndSize) {
  const PerDevice in = MakeInputs(model_, {1}, DType::kF32);
  const std::vector<AxisList> specs = AxisSpecs();
  absl::StatusOr<DeviceResults> out = Run(
      DType::kF32, in,
      [&](Tracer) {
        std::vector<Tracer> r;
        for (const AxisList& axes : specs) {
          r.push_back(lax::axis_index(axes));
          r.push_back(lax::axis_size(axes));
        }
        return r;
      },
      static_cast<int>(2 * specs.size()));
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t s = 0; s < specs.size(); ++s) {
    SCOPED_TRACE(Describe(specs[s]));
    PerDevice index, size;
    for (int64_t p = 0; p < model_.size(); ++p) {
      index.push_back({{}, {static_cast<double>(model_.AxisIndex(p, specs[s]))}});
      size.push_back({{}, {static_cast<double>(model_.AxisSize(specs[s]))}});
    }
    EXPECT_EQ(out->dtypes[2 * s], DType::kS32);
    EXPECT_EQ(out->dtypes[2 * s + 1], DType::kS32);
    EXPECT_TRUE(Matches(out->values[2 * s], index)) << "axis_index";
    EXPECT_TRUE(Matches(out->values[2 * s + 1], size)) << "axis_size";
  }
}

// Several collectives in sequence, mixing axes, consuming each other's results.
TEST_P(CollectivesTest, ChainedCollectives) {
  const PerDevice in = MakeInputs(model_, {3, 5}, DType::kF32);
  const std::vector<AxisList> specs = AxisSpecs();
  const AxisList& first = specs.front();
  const AxisList& last = specs.back();
  const int64_t n = model_.AxisSize(last);
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t i = 0; i < n; ++i) ring.push_back({i, (i + 1) % n});
  absl::StatusOr<DeviceResults> out = Run(
      DType::kF32, in,
      [&](Tracer x) {
        Tracer s = lax::psum(x, first);
        Tracer p = lax::ppermute(s, last, ring);
        return std::vector<Tracer>{lax::all_gather(p, first, 0, true)};
      },
      1);
  ASSERT_TRUE(out.ok()) << out.status();
  PerDevice want = ExpectedAllGather(
      model_, ExpectedPpermute(model_, ExpectedReduce(model_, in, "psum", first), last, ring),
      first, 0, true);
  EXPECT_TRUE(Matches(out->values[0], want, kF32Rel));
}

// The same collectives when the shard_map runs inside a global-view program (the runtime slices
// the operands by in_specs, runs the body per device and assembles the results by out_specs).
TEST_P(CollectivesTest, GlobalViewShardMap) {
  for (const AxisList& axes : AxisSpecs()) {
    const int64_t n = model_.AxisSize(axes);
    const Groups groups = GroupSets(n).back();
    const int64_t g = GroupSize(n, groups);
    SCOPED_TRACE(Describe(axes, groups));
    std::vector<std::pair<int64_t, int64_t>> ring;
    for (int64_t i = 0; i < n; ++i) ring.push_back({i, (i + 1) % n});
    const PerDevice wide = MakeInputs(model_, {3, 2 * g}, DType::kF32);
    // The block is [3, 2g] so that tiled psum_scatter and all_to_all divide it.
    absl::StatusOr<DeviceResults> out = RunPerDevice(
        *mesh_, DType::kF32, wide,
        [&](Tracer x) {
          return std::vector<Tracer>{
              lax::psum(x, axes, groups), lax::all_gather(x, axes, 1, false, groups),
              lax::psum_scatter(x, axes, 1, true, groups), lax::ppermute(x, axes, ring),
              lax::all_to_all(x, axes, 1, 0, true, groups)};
        },
        5, /*global_view=*/true);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(
        Matches(out->values[0], ExpectedReduce(model_, wide, "psum", axes, groups), kF32Rel));
    EXPECT_TRUE(Matches(out->values[1], ExpectedAllGather(model_, wide, axes, 1, false, groups)));
    EXPECT_TRUE(
        Matches(out->values[2], ExpectedPsumScatter(model_, wide, axes, 1, true, groups), kF32Rel));
    EXPECT_TRUE(Matches(out->values[3], ExpectedPpermute(model_, wide, axes, ring)));
    EXPECT_TRUE(Matches(out->values[4], ExpectedAllToAll(model_, wide, axes, 1, 0, true, groups)));
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, CollectivesTest, ::testing::ValuesIn(TestMeshShapes()),
                         MeshShapeName);

}  // namespace
}  // namespace shardjit::collectives_test
