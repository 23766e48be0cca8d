// The x86 data-movement kernels (slices, updates, concatenation, broadcasts, row gathers and
// scatter_adds) against the reference kernels, bit for bit, over ranks 1-4, odd, prime, unit and
// empty dims, every axis, clamped and negative start indices and every dtype, at
// every ISA level of this host; then dynamic_update_slice in place through compiled programs: it
// must reuse a donated buffer and never one that a caller or a live value still reads.
#include "backends/x86/copy_kernels.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/executable.h"
#include "backends/reference/evaluator.h"
#include "backends/reference/kernel.h"
#include "backends/x86/compile.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/isa_test_util.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/primitive.h"
#include "ir/types.h"
#include "ir/verifier.h"

namespace shardjit::backends::x86 {
namespace {

using Dims = std::vector<int64_t>;
using ir::DType;
using ir::Tensor;
using KernelFn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const ir::Op&, const std::vector<Tensor>&, ir::Allocator*)>;

const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kS32, DType::kPred,
                         DType::kF64, DType::kU64, DType::kS8,  DType::kU16};

// Shapes of ranks 1-4 with unit, odd, prime, empty and larger-than-a-small-run dims.
const std::vector<Dims> kShapes = {
    {1},          {7},           {0},          {300},          {1, 1},    {5, 3},
    {3, 0},       {17, 40},      {2, 67},      {1, 9, 1},      {4, 5, 6}, {3, 1, 33},
    {2, 3, 2, 5}, {3, 7, 1, 11}, {2, 0, 3, 2}, {2, 2, 3, 130}, {5000, 3}};

// Random bytes (pred: 0 or 1), so that copies must keep every bit, NaN payloads included.
Tensor RandomTensor(DType dtype, const Dims& dims, std::mt19937& rng) {
  Tensor t = Tensor::Empty({dtype, dims});
  auto* bytes = t.data_as<uint8_t>();
  for (int64_t i = 0; i < t.byte_size(); ++i) {
    bytes[i] = dtype == DType::kPred ? rng() % 2 : static_cast<uint8_t>(rng());
  }
  return t;
}

Tensor Index(int64_t v) { return Tensor::FromDoubles({DType::kS32, {}}, {static_cast<double>(v)}); }

// Sets op's result type from the shape rule; false (with a failure) if the rule rejects it.
bool SetResultType(ir::Op& op, const std::vector<Tensor>& operands) {
  std::vector<ir::ShapedType> types;
  for (const Tensor& t : operands) types.push_back(t.type());
  absl::StatusOr<std::vector<ir::ShapedType>> result = ir::InferResultTypes({}, types, op);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return false;
  op.clear_result_types();
  *op.add_result_types() = ir::ToProto((*result)[0]);
  return true;
}

// Whether `a` and `b` (of one byte size) hold the same bytes; an empty array's data may be null,
// which memcmp must not be given.
bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
}

// Runs `kernel` and the reference kernel of op and expects the same type and bytes.
void ExpectSameAsReference(ir::Op op, const std::vector<Tensor>& operands, const KernelFn& kernel,
                           const std::string& what) {
  if (!SetResultType(op, operands)) return;
  absl::StatusOr<std::vector<Tensor>> want =
      (*reference::FindKernel(op.opcode()))(op, operands, ir::HostAllocator());
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Tensor>> got = kernel(op, operands, ir::HostAllocator());
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  const Tensor& g = (*got)[0];
  const Tensor& w = (*want)[0];
  ASSERT_EQ(g.type(), w.type()) << what;
  EXPECT_TRUE(SameBytes(g, w)) << what;
}

std::string Describe(const std::string& op, DType dtype, const Dims& dims, const Dims& a,
                     const Dims& b) {
  return op + " " + ir::ShapedType{dtype, dims}.ToString() + " " + ::testing::PrintToString(a) +
         " " + ::testing::PrintToString(b);
}

// Start indices of dynamic ops for a dim of `extent` with a window of `size`: in range, at both
// ends, past the end (clamped), negative (clamped) and the s32 extremes.
std::vector<int64_t> StartCases(int64_t extent, int64_t size) {
  const int64_t limit = extent - size;
  return {0,
          limit / 2,
          limit,
          limit + 1,
          extent + 7,
          -1,
          -extent - 3,
          std::numeric_limits<int32_t>::min(),
          std::numeric_limits<int32_t>::max()};
}

class CopyKernelsTest : public IsaLevelTest {
 protected:
  // s32 row indices [batch..., 1] into a leading dim of n: in range, at both ends, past them and
  // negative (clamped into range for PROMISE_IN_BOUNDS, which promises them in bounds).
  Tensor RowIndices(const Dims& batch, int64_t n, ir::GatherScatterMode mode) {
    const std::vector<int64_t> picks = {0, n - 1, n, n + 5, -1, -n - 2, n / 2};
    Dims dims = batch;
    dims.push_back(1);
    Tensor ids = Tensor::Empty({DType::kS32, dims});
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      int64_t v = picks[(i + rng_()) % picks.size()];
      if (mode == ir::PROMISE_IN_BOUNDS) v = std::clamp<int64_t>(v, 0, n - 1);
      ids.data_as<int32_t>()[i] = static_cast<int32_t>(v);
    }
    return ids;
  }
  std::mt19937 rng_{7};
};

TEST_P(CopyKernelsTest, Slice) {
  for (DType dtype : kDTypes) {
    for (const Dims& dims : kShapes) {
      Tensor x = RandomTensor(dtype, dims, rng_);
      for (int trial = 0; trial < 6; ++trial) {
        ir::Op op;
        op.set_opcode("slice");
        Dims start, limit, steps;
        for (int64_t d : dims) {
          const int64_t a = trial == 0 ? 0 : static_cast<int64_t>(rng_() % (d + 1));
          const int64_t b = trial == 0 ? d : a + static_cast<int64_t>(rng_() % (d - a + 1));
          start.push_back(a);
          limit.push_back(b);
          steps.push_back(trial < 3 ? 1 : 1 + static_cast<int64_t>(rng_() % 3));
        }
        for (size_t i = 0; i < dims.size(); ++i) {
          op.mutable_slice()->add_start_indices(start[i]);
          op.mutable_slice()->add_limit_indices(limit[i]);
          if (trial >= 3) op.mutable_slice()->add_strides(steps[i]);
        }
        ExpectSameAsReference(op, {x}, SliceKernel, Describe("slice", dtype, dims, start, limit));
      }
    }
  }
}

TEST_P(CopyKernelsTest, DynamicSliceClampsLikeJax) {
  for (DType dtype : kDTypes) {
    for (const Dims& dims : kShapes) {
      Tensor x = RandomTensor(dtype, dims, rng_);
      for (int trial = 0; trial < 3; ++trial) {
        Dims sizes;
        for (int64_t d : dims) {
          sizes.push_back(trial == 0 ? d : static_cast<int64_t>(rng_() % (d + 1)));
        }
        ir::Op op;
        op.set_opcode("dynamic_slice");
        for (int64_t s : sizes) op.mutable_dynamic_slice()->add_slice_sizes(s);
        // Each start case on every dim at once, then mixed per dim.
        for (size_t c = 0; c < StartCases(1, 1).size() + 3; ++c) {
          std::vector<Tensor> operands = {x};
          Dims starts;
          for (size_t i = 0; i < dims.size(); ++i) {
            std::vector<int64_t> cases = StartCases(dims[i], sizes[i]);
            starts.push_back(cases[c < cases.size() ? c : rng_() % cases.size()]);
            operands.push_back(Index(starts.back()));
          }
          ExpectSameAsReference(op, operands, DynamicSliceKernel,
                                Describe("dynamic_slice", dtype, dims, sizes, starts));
        }
      }
    }
  }
}

// A window that is one run of the operand's elements (leading rows, or one element of the leading
// dims and whole along the rest) is read in place; any other window is a copy.
TEST_P(CopyKernelsTest, OneRunWindowsShareTheOperandsStorage) {
  struct Case {
    Dims dims, sizes, starts;
    bool shared;
  };
  const Case cases[] = {
      {{8, 6}, {3, 6}, {2, 0}, true},          {{8, 6}, {8, 6}, {0, 0}, true},
      {{8, 6}, {1, 4}, {5, 1}, true},          {{2, 3, 5}, {1, 2, 5}, {1, 1, 0}, true},
      {{2, 3, 5}, {1, 1, 3}, {1, 2, 2}, true}, {{1, 1, 7}, {1, 1, 7}, {0, 0, 0}, true},
      {{8, 6}, {3, 5}, {2, 0}, false},         {{2, 3, 5}, {2, 1, 5}, {0, 1, 0}, false},
      {{2, 3, 5}, {1, 2, 4}, {0, 0, 0}, false},
  };
  for (DType dtype : kDTypes) {
    for (const Case& c : cases) {
      Tensor x = RandomTensor(dtype, c.dims, rng_);
      ir::Op op;
      op.set_opcode("dynamic_slice");
      for (int64_t s : c.sizes) op.mutable_dynamic_slice()->add_slice_sizes(s);
      std::vector<Tensor> operands = {x};
      for (int64_t s : c.starts) operands.push_back(Index(s));
      const std::string what = Describe("dynamic_slice", dtype, c.dims, c.sizes, c.starts);
      ExpectSameAsReference(op, operands, DynamicSliceKernel, what);
      if (!SetResultType(op, operands)) continue;
      absl::StatusOr<std::vector<Tensor>> got =
          DynamicSliceKernel(op, operands, ir::HostAllocator());
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      EXPECT_EQ((*got)[0].SharesStorageWith(x), c.shared) << what;
    }
  }
}

TEST_P(CopyKernelsTest, DynamicUpdateSliceCopyingAndInPlace) {
  for (DType dtype : kDTypes) {
    for (const Dims& dims : kShapes) {
      for (int trial = 0; trial < 3; ++trial) {
        Dims sizes;
        for (int64_t d : dims) {
          sizes.push_back(trial == 0 ? d : static_cast<int64_t>(rng_() % (d + 1)));
        }
        Tensor update = RandomTensor(dtype, sizes, rng_);
        for (size_t c = 0; c < StartCases(1, 1).size() + 3; ++c) {
          Tensor x = RandomTensor(dtype, dims, rng_);
          std::vector<Tensor> operands = {x, update};
          Dims starts;
          for (size_t i = 0; i < dims.size(); ++i) {
            std::vector<int64_t> cases = StartCases(dims[i], sizes[i]);
            starts.push_back(cases[c < cases.size() ? c : rng_() % cases.size()]);
            operands.push_back(Index(starts.back()));
          }
          const std::string what = Describe("dynamic_update_slice", dtype, dims, sizes, starts);
          ir::Op op;
          op.set_opcode("dynamic_update_slice");
          // `x` is held here too: the kernel must copy and leave it as it was.
          const Tensor before = x.Copy();
          ExpectSameAsReference(op, operands, DynamicUpdateSliceKernel, what);
          ASSERT_TRUE(SameBytes(x, before)) << what;
          // Donated (the only reference): the update lands in the operand's own buffer.
          if (!SetResultType(op, operands)) return;
          absl::StatusOr<std::vector<Tensor>> want =
              (*reference::FindKernel(op.opcode()))(op, operands, ir::HostAllocator());
          ASSERT_TRUE(want.ok()) << want.status();
          const void* buffer = x.data();
          operands[0] = std::move(x);
          ASSERT_TRUE(operands[0].unique());
          absl::StatusOr<std::vector<Tensor>> got =
              DynamicUpdateSliceKernel(op, operands, ir::HostAllocator());
          ASSERT_TRUE(got.ok()) << got.status();
          const Tensor& g = (*got)[0];
          if (update.num_elements() > 0 && update.dims() != dims) {
            EXPECT_EQ(g.data(), buffer) << what;
          }
          EXPECT_TRUE(SameBytes(g, (*want)[0])) << what;
        }
      }
    }
  }
}

TEST_P(CopyKernelsTest, Concatenate) {
  for (DType dtype : kDTypes) {
    for (const Dims& dims : kShapes) {
      for (size_t axis = 0; axis < dims.size(); ++axis) {
        for (int count : {1, 2, 3, 5}) {
          std::vector<Tensor> operands;
          for (int k = 0; k < count; ++k) {
            Dims d = dims;
            // Sizes along the axis: the shape's own, 0, 1 and odd ones.
            const int64_t sizes[] = {dims[axis], 0, 1, 3, 17};
            d[axis] = k == 0 ? dims[axis] : sizes[rng_() % 5];
            operands.push_back(RandomTensor(dtype, d, rng_));
          }
          ir::Op op;
          op.set_opcode("concatenate");
          op.mutable_concatenate()->set_dimension(static_cast<int64_t>(axis));
          ExpectSameAsReference(
              op, operands, ConcatenateKernel,
              Describe("concatenate", dtype, dims, {static_cast<int64_t>(axis)}, {count}));
        }
      }
    }
  }
}

// Row gathers (jnp.take(x, ids, 0)) over every shape with a leading dim, index arrays of batch
// rank 0-2 (none empty and empty), indices in range, at both ends, past them and negative, in
// every mode; other dimension numbers are declined for the reference kernel.
TEST_P(CopyKernelsTest, GatherOfWholeRows) {
  const std::vector<Dims> index_batches = {{}, {1}, {6}, {0}, {2, 3}};
  for (DType dtype : kDTypes) {
    for (const Dims& dims : kShapes) {
      if (dims[0] == 0) continue;
      Tensor x = RandomTensor(dtype, dims, rng_);
      const int64_t n = dims[0];
      for (const Dims& batch : index_batches) {
        for (auto mode : {ir::CLIP, ir::FILL_OR_DROP, ir::PROMISE_IN_BOUNDS}) {
          const Tensor ids = RowIndices(batch, n, mode);
          const Dims& index_dims = ids.dims();
          ir::Op op;
          op.set_opcode("gather");
          ir::GatherAttrs& a = *op.mutable_gather();
          for (size_t d = 1; d < dims.size(); ++d) a.add_offset_dims(batch.size() + d - 1);
          a.add_collapsed_slice_dims(0);
          a.add_start_index_map(0);
          a.add_slice_sizes(1);
          for (size_t d = 1; d < dims.size(); ++d) a.add_slice_sizes(dims[d]);
          a.set_mode(mode);
          a.set_fill_value(dtype == DType::kPred ? 1 : 3);
          ExpectSameAsReference(op, {x, ids}, GatherRowsKernel,
                                Describe("gather", dtype, dims, index_dims, {mode}));
        }
      }
    }
  }
  // A window narrower than a row, and rows picked along another dim: declined.
  Tensor x = RandomTensor(DType::kF32, {5, 4}, rng_);
  Tensor ids = Tensor::FromDoubles({DType::kS32, {2, 1}}, {1, 3});
  for (int variant = 0; variant < 2; ++variant) {
    ir::Op op;
    op.set_opcode("gather");
    ir::GatherAttrs& a = *op.mutable_gather();
    a.add_offset_dims(1);
    a.add_collapsed_slice_dims(variant == 0 ? 0 : 1);
    a.add_start_index_map(variant == 0 ? 0 : 1);
    a.add_slice_sizes(variant == 0 ? 1 : 5);
    a.add_slice_sizes(variant == 0 ? 3 : 1);
    if (!SetResultType(op, {x, ids})) return;
    absl::StatusOr<std::vector<Tensor>> got = GatherRowsKernel(op, {x, ids}, ir::HostAllocator());
    EXPECT_TRUE(absl::IsUnimplemented(got.status())) << got.status();
  }
}

// scatter_add of whole f32 rows (an embedding's gradient) against the reference kernel, bit for
// bit: rows of every length (past 2 KiB too, where rows are prefetched), index arrays of batch rank
// 0-2, repeated rows, indices in range, at both ends, past them and negative in every mode, an
// inf in the table and NaNs in the updates; in place when the table is donated; other dtypes
// and dimension numbers declined.
TEST_P(CopyKernelsTest, ScatterAddOfWholeRows) {
  std::uniform_real_distribution<float> value(-4, 4);
  auto random_f32 = [&](const Dims& dims) {
    Tensor t = Tensor::Empty({DType::kF32, dims});
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = value(rng_);
    return t;
  };
  auto scatter_add = [](const Dims& batch, int64_t rank, ir::GatherScatterMode mode) {
    ir::Op op;
    op.set_opcode("scatter_add");
    ir::ScatterAttrs& a = *op.mutable_scatter();
    for (int64_t d = 1; d < rank; ++d) a.add_update_window_dims(batch.size() + d - 1);
    a.add_inserted_window_dims(0);
    a.add_scatter_dims_to_operand_dims(0);
    a.set_mode(mode);
    return op;
  };
  const std::vector<Dims> shapes = {{1}, {7}, {5, 3}, {3, 0}, {17, 40}, {4, 5, 6}, {6, 2100}};
  for (const Dims& dims : shapes) {
    const int64_t n = dims[0];
    for (const Dims& batch : std::vector<Dims>{{}, {1}, {9}, {0}, {2, 3}}) {
      for (auto mode : {ir::CLIP, ir::FILL_OR_DROP, ir::PROMISE_IN_BOUNDS}) {
        const Tensor ids = RowIndices(batch, n, mode);
        const Dims& index_dims = ids.dims();
        Dims update_dims = batch;
        update_dims.insert(update_dims.end(), dims.begin() + 1, dims.end());
        Tensor table = random_f32(dims);
        Tensor updates = random_f32(update_dims);
        if (table.num_elements() > 1) table.data_as<float>()[1] = INFINITY;
        if (updates.num_elements() > 2) updates.data_as<float>()[2] = NAN;
        ExpectSameAsReference(scatter_add(batch, dims.size(), mode), {table, ids, updates},
                              ScatterAddRowsKernel,
                              Describe("scatter_add", DType::kF32, dims, index_dims, {mode}));
      }
    }
  }
  // Donated (the only holder): the sums land in the table's own buffer.
  Tensor table = random_f32({8, 300});
  Tensor ids = Tensor::FromDoubles({DType::kS32, {3, 1}}, {5, 2, 5});
  Tensor updates = random_f32({3, 300});
  std::vector<float> want(table.data_as<float>(), table.data_as<float>() + 8 * 300);
  for (int k = 0; k < 3; ++k) {
    const int row = k == 1 ? 2 : 5;
    for (int j = 0; j < 300; ++j) want[row * 300 + j] += updates.data_as<float>()[k * 300 + j];
  }
  ir::Op op = scatter_add({3}, 2, ir::FILL_OR_DROP);
  if (!SetResultType(op, {table, ids, updates})) return;
  const void* buffer = table.data();
  std::vector<Tensor> operands = {std::move(table), ids, updates};
  absl::StatusOr<std::vector<Tensor>> got =
      ScatterAddRowsKernel(op, std::move(operands), ir::HostAllocator());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].data(), buffer);
  EXPECT_EQ(std::vector<float>((*got)[0].data_as<float>(), (*got)[0].data_as<float>() + 2400),
            want);
  // bf16 rows, and a window narrower than a row: declined.
  Tensor bf16_table = Tensor::Zeros({DType::kBF16, {8, 4}});
  Tensor bf16_updates = Tensor::Zeros({DType::kBF16, {3, 4}});
  EXPECT_TRUE(absl::IsUnimplemented(
      ScatterAddRowsKernel(op, {bf16_table, ids, bf16_updates}, ir::HostAllocator()).status()));
  Tensor narrow = random_f32({3, 200});
  EXPECT_TRUE(absl::IsUnimplemented(
      ScatterAddRowsKernel(op, {random_f32({8, 300}), ids, narrow}, ir::HostAllocator())
          .status()));
}

TEST_P(CopyKernelsTest, BroadcastInDimOverEveryDimSubset) {
  const std::vector<Dims> out_shapes = {
      {1},      {7},       {0},        {3000},       {5, 3},        {3, 0},         {17, 40},
      {2, 67},  {4, 5, 6}, {3, 1, 33}, {2, 3, 2, 5}, {3, 7, 2, 11}, {2, 2, 3, 130}, {1000, 3},
      {3, 2100}};
  for (DType dtype : kDTypes) {
    for (const Dims& shape : out_shapes) {
      const int rank = static_cast<int>(shape.size());
      // Every subset of the output dims is mapped from an operand dim (of full size or 1).
      for (int mask = 0; mask < (1 << rank); ++mask) {
        for (int unit_mask : {0, -1}) {
          Dims in, bdims;
          for (int d = 0; d < rank; ++d) {
            if (!(mask & (1 << d))) continue;
            bdims.push_back(d);
            in.push_back((unit_mask & (1 << d)) && d % 2 == 0 ? 1 : shape[d]);
          }
          ir::Op op;
          op.set_opcode("broadcast_in_dim");
          for (int64_t s : shape) op.mutable_broadcast_in_dim()->add_shape(s);
          for (int64_t b : bdims) op.mutable_broadcast_in_dim()->add_broadcast_dimensions(b);
          ExpectSameAsReference(op, {RandomTensor(dtype, in, rng_)}, BroadcastInDimKernel,
                                Describe("broadcast_in_dim", dtype, shape, in, bdims));
        }
      }
    }
  }
}

TEST_P(CopyKernelsTest, BadInputIsAnErrorNotACrash) {
  Tensor x = RandomTensor(DType::kF32, {4, 6}, rng_);
  ir::Op slice;
  slice.set_opcode("slice");
  for (int64_t v : {1, 2}) slice.mutable_slice()->add_start_indices(v);
  for (int64_t v : {3, 9}) slice.mutable_slice()->add_limit_indices(v);  // 9 > 6
  *slice.add_result_types() = ir::ToProto(ir::ShapedType{DType::kF32, {2, 7}});
  EXPECT_TRUE(absl::IsInvalidArgument(SliceKernel(slice, {x}, ir::HostAllocator()).status()));

  ir::Op ds;
  ds.set_opcode("dynamic_slice");
  for (int64_t v : {2, 2}) ds.mutable_dynamic_slice()->add_slice_sizes(v);
  *ds.add_result_types() = ir::ToProto(ir::ShapedType{DType::kF32, {2, 2}});
  // A missing index, then an f32 index.
  EXPECT_FALSE(DynamicSliceKernel(ds, {x, Index(0)}, ir::HostAllocator()).ok());
  Tensor f32_index = Tensor::FromDoubles({DType::kF32, {}}, {1});
  EXPECT_FALSE(DynamicSliceKernel(ds, {x, Index(0), f32_index}, ir::HostAllocator()).ok());

  ir::Op dus;
  dus.set_opcode("dynamic_update_slice");
  *dus.add_result_types() = ir::ToProto(x.type());
  Tensor too_big = RandomTensor(DType::kF32, {5, 6}, rng_);
  EXPECT_FALSE(
      DynamicUpdateSliceKernel(dus, {x, too_big, Index(0), Index(0)}, ir::HostAllocator()).ok());

  ir::Op concat;
  concat.set_opcode("concatenate");
  concat.mutable_concatenate()->set_dimension(0);
  *concat.add_result_types() = ir::ToProto(ir::ShapedType{DType::kF32, {8, 6}});
  Tensor other = RandomTensor(DType::kBF16, {4, 6}, rng_);
  EXPECT_FALSE(ConcatenateKernel(concat, {x, other}, ir::HostAllocator()).ok());

  ir::Op bcast;
  bcast.set_opcode("broadcast_in_dim");
  for (int64_t s : {4, 6}) bcast.mutable_broadcast_in_dim()->add_shape(s);
  bcast.mutable_broadcast_in_dim()->add_broadcast_dimensions(0);  // 6 != 4
  *bcast.add_result_types() = ir::ToProto(ir::ShapedType{DType::kF32, {4, 6}});
  Tensor row = RandomTensor(DType::kF32, {6}, rng_);
  EXPECT_FALSE(BroadcastInDimKernel(bcast, {row}, ir::HostAllocator()).ok());
}

INSTANTIATE_TEST_SUITE_P(Isa, CopyKernelsTest, ::testing::ValuesIn(kAllIsaLevels), IsaLevelName);

// ---------------------------------------------------------------------------------------------
// dynamic_update_slice in place, through compiled programs
// ---------------------------------------------------------------------------------------------

// Heap memory that counts the allocations of one size.
class CountingAllocator final : public ir::Allocator {
 public:
  explicit CountingAllocator(size_t counted_bytes) : counted_bytes_(counted_bytes) {}
  void* Allocate(size_t bytes) override {
    if (bytes == counted_bytes_) ++count_;
    return ir::HostAllocator()->Allocate(bytes);
  }
  void Deallocate(void* ptr, size_t bytes) override { ir::HostAllocator()->Deallocate(ptr, bytes); }
  int count() const { return count_; }

 private:
  size_t counted_bytes_;
  int count_ = 0;
};

// A device with no peers: memory only.
class TestDevice final : public DeviceContext {
 public:
  explicit TestDevice(ir::Allocator* allocator) : allocator_(allocator) {}
  ir::Allocator* allocator() override { return allocator_; }
  absl::StatusOr<std::vector<Tensor>> RunCollective(const ir::Op& op,
                                                    const std::vector<Tensor>&) override {
    return absl::UnimplementedError(op.opcode() + ": no peers in this test");
  }
  absl::StatusOr<std::vector<Tensor>> RunShardMap(const ir::Op& op,
                                                  const std::vector<Tensor>&) override {
    return absl::UnimplementedError(op.opcode() + ": no mesh in this test");
  }
  absl::Status Cancelled() override { return absl::OkStatus(); }

 private:
  ir::Allocator* allocator_;
};

constexpr int64_t kRows = 64, kCols = 6, kBlock = 16;
constexpr size_t kAccBytes = kRows * kCols * sizeof(float);

// The function `main` with body `body` (text), verified.
ir::Function Parse(const std::string& body) {
  const std::string text =
      "module m [view=per_device mesh={x:1} devices=(0) "
      "entry=main]\nfunc main = " +
      body + "\n";
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return {};
  absl::Status verified = ir::VerifyModule(*m);
  EXPECT_TRUE(verified.ok()) << verified << "\n" << text;
  return m->functions(0);
}

struct ProgramRun {
  // Declared first: it must outlive the x86 results it allocated.
  std::unique_ptr<CountingAllocator> allocator = std::make_unique<CountingAllocator>(kAccBytes);
  std::vector<Tensor> x86;        // results on the x86 backend
  std::vector<Tensor> reference;  // results on the reference backend
  int acc_allocations = 0;        // x86 allocations of an accumulator's size
};

ProgramRun RunBoth(const std::string& body, const std::vector<Tensor>& args) {
  ProgramRun run;
  ir::Function f = Parse(body);
  absl::StatusOr<std::unique_ptr<Executable>> x86 = Compile(f);
  absl::StatusOr<std::unique_ptr<Executable>> ref = reference::Compile(f);
  EXPECT_TRUE(x86.ok()) << x86.status();
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!x86.ok() || !ref.ok()) return run;
  TestDevice x86_device(run.allocator.get()), ref_device(ir::HostAllocator());
  absl::StatusOr<std::vector<Tensor>> got = (*x86)->Run(args, x86_device);
  absl::StatusOr<std::vector<Tensor>> want = (*ref)->Run(args, ref_device);
  EXPECT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(want.ok()) << want.status();
  if (!got.ok() || !want.ok()) return run;
  run.x86 = *got;
  run.reference = *want;
  run.acc_allocations = run.allocator->count();
  return run;
}

void ExpectSameResults(const ProgramRun& run) {
  ASSERT_EQ(run.x86.size(), run.reference.size());
  ASSERT_FALSE(run.x86.empty());
  for (size_t i = 0; i < run.x86.size(); ++i) {
    ASSERT_EQ(run.x86[i].type(), run.reference[i].type());
    EXPECT_TRUE(SameBytes(run.x86[i], run.reference[i]))
        << "result " << i;
  }
}

std::vector<Tensor> Args(int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> a(kRows * kCols), b(kBlock * kCols);
  for (double& v : a) v = normal(rng);
  for (double& v : b) v = normal(rng);
  return {Tensor::FromDoubles({DType::kF32, {kRows, kCols}}, a),
          Tensor::FromDoubles({DType::kF32, {kBlock, kCols}}, b)};
}

// A fori_loop filling an accumulator block by block: after the first value, every update lands in
// the carried buffer.
const char kFillLoop[] = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    d:f32[64,6] = fori_loop[lower=0 upper=4 body={ lambda ; e:s32[] f:f32[64,6]. let
          g:s32[] = constant[dtype=s32 value=(16)]
          h:s32[] = mul e g
          i:s32[] = constant[dtype=s32 value=(0)]
          j:f32[16,6] = add b b
          k:f32[64,6] = dynamic_update_slice f j h i
        in (k) }] c
  in (d) })";

TEST(DynamicUpdateSliceInPlace, LoopCarryIsUpdatedInPlace) {
  ProgramRun run = RunBoth(kFillLoop, Args(1));
  ExpectSameResults(run);
  EXPECT_EQ(run.acc_allocations, 1);  // `c`; the four updates reuse it
}

TEST(DynamicUpdateSliceInPlace, CallersArgumentIsCopiedOnce) {
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    d:f32[64,6] = fori_loop[lower=0 upper=4 body={ lambda ; e:s32[] f:f32[64,6]. let
          g:s32[] = constant[dtype=s32 value=(16)]
          h:s32[] = mul e g
          i:s32[] = constant[dtype=s32 value=(0)]
          k:f32[64,6] = dynamic_update_slice f b h i
        in (k) }] a
  in (d) })";
  std::vector<Tensor> args = Args(2);
  const Tensor before = args[0].Copy();
  ProgramRun run = RunBoth(body, args);
  ExpectSameResults(run);
  EXPECT_TRUE(SameBytes(args[0], before));
  EXPECT_EQ(run.acc_allocations,
            1);  // the first update copies the argument, the others reuse it
}

TEST(DynamicUpdateSliceInPlace, ParamUpdatedDirectlyIsNotTouched) {
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    i:s32[] = constant[dtype=s32 value=(5)]
    j:s32[] = constant[dtype=s32 value=(-2)]
    k:f32[64,6] = dynamic_update_slice a b i j
  in (k) })";
  std::vector<Tensor> args = Args(3);
  const Tensor before = args[0].Copy();
  ProgramRun run = RunBoth(body, args);
  ExpectSameResults(run);
  EXPECT_TRUE(SameBytes(args[0], before));
}

TEST(DynamicUpdateSliceInPlace, ValueReadAfterTheUpdateKeepsItsBuffer) {
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    i:s32[] = constant[dtype=s32 value=(40)]
    j:s32[] = constant[dtype=s32 value=(0)]
    d:f32[64,6] = dynamic_update_slice c b i j
    e:f32[64,6] = sub d c
  in (e) })";
  ExpectSameResults(RunBoth(body, Args(4)));
}

TEST(DynamicUpdateSliceInPlace, ViewOfTheOperandKeepsItsBuffer) {
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    r:f32[384] = reshape[new_sizes=(384)] c
    i:s32[] = constant[dtype=s32 value=(3)]
    j:s32[] = constant[dtype=s32 value=(0)]
    d:f32[64,6] = dynamic_update_slice c b i j
    e:f32[64,6] = reshape[new_sizes=(64,6)] r
    f:f32[64,6] = sub d e
  in (f) })";
  ExpectSameResults(RunBoth(body, Args(5)));
}

TEST(DynamicUpdateSliceInPlace, RowsReadInPlaceKeepTheirOperand) {
  // `d` is a block of c's rows in c's storage: updating it must not write into `c`, which is read
  // after; and `g` (rows of the argument) must not write into the caller's array.
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    i:s32[] = constant[dtype=s32 value=(16)]
    j:s32[] = constant[dtype=s32 value=(0)]
    d:f32[32,6] = dynamic_slice[slice_sizes=(32,6)] c i j
    e:f32[32,6] = dynamic_update_slice d b i j
    f:f32[32,6] = dynamic_slice[slice_sizes=(32,6)] c i j
    g:f32[32,6] = dynamic_slice[slice_sizes=(32,6)] a j j
    h:f32[32,6] = dynamic_update_slice g b j j
    k:f32[32,6] = sub e f
  in (k, h, c) })";
  std::vector<Tensor> args = Args(8);
  const Tensor before = args[0].Copy();
  ProgramRun run = RunBoth(body, args);
  ExpectSameResults(run);
  EXPECT_TRUE(SameBytes(args[0], before));
}

TEST(DynamicUpdateSliceInPlace, CarryReturnedAsAnotherCarryKeepsItsBuffer) {
  // The body returns the old accumulator as a second carry, and both carries start as one value.
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    d:f32[64,6] l:f32[64,6] = fori_loop[lower=0 upper=3 body={ lambda ; e:s32[] f:f32[64,6]
                                                                      m:f32[64,6]. let
          g:s32[] = constant[dtype=s32 value=(20)]
          h:s32[] = mul e g
          i:s32[] = constant[dtype=s32 value=(1)]
          k:f32[64,6] = dynamic_update_slice f b h i
          n:f32[64,6] = add k m
        in (n, f) }] c c
  in (d, l) })";
  ExpectSameResults(RunBoth(body, Args(6)));
}

TEST(DynamicUpdateSliceInPlace, CapturedValueIsNotUpdated) {
  // The loop body updates a value of the enclosing region on every iteration.
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    d:f32[64,6] = fori_loop[lower=0 upper=3 body={ lambda ; e:s32[] f:f32[64,6]. let
          g:s32[] = constant[dtype=s32 value=(24)]
          h:s32[] = mul e g
          i:s32[] = constant[dtype=s32 value=(0)]
          k:f32[64,6] = dynamic_update_slice c b h i
          n:f32[64,6] = add k f
        in (n) }] a
    o:f32[64,6] = sub d c
  in (o) })";
  ExpectSameResults(RunBoth(body, Args(7)));
}

TEST(DynamicUpdateSliceInPlace, InitialCarryAlsoReadByTheBody) {
  // `c` dies at the loop, but the body reads it on every iteration: it must stay put.
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    d:f32[64,6] = fori_loop[lower=0 upper=3 body={ lambda ; e:s32[] f:f32[64,6]. let
          g:s32[] = constant[dtype=s32 value=(24)]
          h:s32[] = mul e g
          i:s32[] = constant[dtype=s32 value=(0)]
          k:f32[64,6] = dynamic_update_slice f b h i
          n:f32[64,6] = add k c
        in (n) }] c
  in (d) })";
  ExpectSameResults(RunBoth(body, Args(9)));
}

TEST(DynamicUpdateSliceInPlace, OperandAlsoTheUpdate) {
  const std::string body = R"({ lambda ; a:f32[64,6] b:f32[16,6]. let
    c:f32[64,6] = add a a
    s:f32[16,6] = slice[start_indices=(0,0) limit_indices=(16,6)] c
    i:s32[] = constant[dtype=s32 value=(30)]
    j:s32[] = constant[dtype=s32 value=(0)]
    d:f32[64,6] = dynamic_update_slice c s i j
    e:f32[64,6] = dynamic_update_slice d d j j
  in (e) })";
  ExpectSameResults(RunBoth(body, Args(8)));
}

}  // namespace
}  // namespace shardjit::backends::x86
