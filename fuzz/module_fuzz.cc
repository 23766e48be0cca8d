// Structure-aware fuzzing of the backends: the bytes drive the construction of a valid
// per-device program (parameters of random shapes and dtypes, then elementwise maps, compares and
// selects, converts, reductions, transposes, slices, broadcasts, concatenations, reshapes and
// dot_generals on values picked among those so far; ops the shape rule refuses are skipped) and
// its inputs. The program runs on the reference backend and, after elementwise fusion, on the
// x86 backend; both must succeed or fail alike and agree: integers and preds exactly, floats
// within rounding (both non-finite counts as agreeing: approximations may overflow apart). Values
// past a discontinuity of a rounded float (an s32 convert or a compare of a computed float) or
// past a function of a sum that may have cancelled (exp, tanh, a product... of such a sum: its
// error is the size of the terms, not of the sum), and everything computed from those, may
// differ by more than rounding and are not compared (see Lineage).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "backends/executable.h"
#include "backends/reference/evaluator.h"
#include "backends/x86/compile.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fuse_elementwise.h"

namespace shardjit {
namespace {

using ir::DType;
using ir::Tensor;

// Draws small numbers from the input bytes (zeros once they run out).
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Next() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }
  int64_t Pick(int64_t n) { return n <= 1 ? 0 : Next() % n; }
  bool empty() const { return size_ == 0; }

 private:
  const uint8_t* data_;
  size_t size_;
};

class HostDevice final : public backends::DeviceContext {
 public:
  ir::Allocator* allocator() override { return ir::HostAllocator(); }
  absl::StatusOr<std::vector<Tensor>> RunCollective(const ir::Op& op,
                                                    const std::vector<Tensor>&) override {
    return absl::UnimplementedError(op.opcode());
  }
  absl::StatusOr<std::vector<Tensor>> RunShardMap(const ir::Op& op,
                                                  const std::vector<Tensor>&) override {
    return absl::UnimplementedError(op.opcode());
  }
  absl::Status Cancelled() override { return absl::OkStatus(); }
};

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kS32};

ir::ShapedType RandomType(Bytes& in) {
  ir::ShapedType t{kDtypes[in.Pick(3)], {}};
  const int64_t rank = in.Pick(4);
  for (int64_t d = 0; d < rank; ++d) {
    // Mostly tiny; sometimes past a vector's lanes, to reach the masked tails.
    t.dims.push_back(in.Pick(8) == 0 ? 17 + in.Pick(20) : 1 + in.Pick(6));
  }
  return t;
}

// One random op on `values` (its operands), or an op the shape rule may refuse.
ir::Op RandomOp(Bytes& in, const ir::FunctionBuilder& b, const std::vector<int64_t>& values,
                std::vector<int64_t>& operands) {
  auto pick = [&] { return values[in.Pick(static_cast<int64_t>(values.size()))]; };
  const int64_t a = pick(), c = pick();
  const ir::ShapedType& ta = b.TypeOf(a);
  const int64_t rank = ta.rank();
  ir::Op op;
  switch (in.Pick(12)) {
    case 0: {
      static constexpr const char* kBinary[] = {"add", "sub", "mul", "max", "min", "div"};
      op.set_opcode(kBinary[in.Pick(6)]);
      operands = {a, c};
      break;
    }
    case 1: {
      static constexpr const char* kUnary[] = {"neg",      "abs",  "exp",  "tanh",
                                               "logistic", "sqrt", "log", "rsqrt"};
      op.set_opcode(kUnary[in.Pick(8)]);
      operands = {a};
      break;
    }
    case 2:
      op.set_opcode("compare");
      op.mutable_compare()->set_direction(static_cast<ir::ComparisonDirection>(1 + in.Pick(6)));
      operands = {a, c};
      break;
    case 3:
      op.set_opcode("select");
      operands = {a, c, pick()};
      break;
    case 4:
      op.set_opcode("convert_element_type");
      op.mutable_convert_element_type()->set_new_dtype(ir::ToProto(kDtypes[in.Pick(3)]));
      operands = {a};
      break;
    case 5: {
      static constexpr const char* kReduce[] = {"reduce_sum", "reduce_max", "reduce_min"};
      op.set_opcode(kReduce[in.Pick(3)]);
      if (rank > 0) op.mutable_reduce()->add_axes(in.Pick(rank));
      operands = {a};
      break;
    }
    case 6: {
      op.set_opcode("transpose");
      std::vector<int64_t> perm(rank);
      for (int64_t d = 0; d < rank; ++d) perm[d] = d;
      for (int64_t d = rank - 1; d > 0; --d) std::swap(perm[d], perm[in.Pick(d + 1)]);
      for (int64_t p : perm) op.mutable_transpose()->add_permutation(p);
      operands = {a};
      break;
    }
    case 7:
      op.set_opcode("slice");
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t start = in.Pick(ta.dims[d]);
        op.mutable_slice()->add_start_indices(start);
        op.mutable_slice()->add_limit_indices(start + 1 + in.Pick(ta.dims[d] - start));
      }
      operands = {a};
      break;
    case 8:
      op.set_opcode("broadcast_in_dim");
      op.mutable_broadcast_in_dim()->add_shape(1 + in.Pick(3));
      for (int64_t d = 0; d < rank; ++d) {
        op.mutable_broadcast_in_dim()->add_shape(ta.dims[d]);
        op.mutable_broadcast_in_dim()->add_broadcast_dimensions(d + 1);
      }
      operands = {a};
      break;
    case 9:
      op.set_opcode("dot_general");
      if (rank > 0) op.mutable_dot_general()->add_lhs_contracting_dims(rank - 1);
      op.mutable_dot_general()->add_rhs_contracting_dims(0);
      if (in.Pick(2) == 0) op.mutable_dot_general()->set_preferred_element_type(ir::F32);
      operands = {a, c};
      break;
    case 10:
      op.set_opcode("concatenate");
      op.mutable_concatenate()->set_dimension(in.Pick(std::max<int64_t>(rank, 1)));
      operands = {a, c};
      break;
    default:
      op.set_opcode("reshape");
      op.mutable_reshape()->add_new_sizes(ta.num_elements());
      operands = {a};
      break;
  }
  return op;
}

Tensor RandomInput(Bytes& in, const ir::ShapedType& type) {
  std::vector<double> values(type.num_elements());
  for (double& v : values) {
    const int byte = in.Next();
    v = type.dtype == DType::kS32 ? byte - 128 : (byte - 128) / 16.0;
  }
  return Tensor::FromDoubles(type, values);
}

// Floats agree within `rel` of the value plus an absolute floor: sums that cancel (a dot of
// products adding to ~0) keep rounding errors of their terms, which the two backends accumulate
// in different orders; `scale` is the largest finite magnitude in the result. Integers and preds
// (of stable lineage) agree exactly.
bool Agree(double want, double got, DType dtype, double scale) {
  if (dtype == DType::kPred || dtype == DType::kS32) return want == got;
  if (!std::isfinite(want) || !std::isfinite(got)) {
    return std::isnan(want) == std::isnan(got) || (std::isinf(want) || std::isinf(got));
  }
  const double rel = dtype == DType::kBF16 ? 1.0 / 64 : 1e-3;
  return std::abs(want - got) <= rel * std::abs(want) + 1e-4 * (1 + scale);
}

// Which values the backends may compute apart by more than rounding. Computed floats may round
// differently (FMA contraction, approximations, summation order): `rounded`. A sum of rounded
// values (add, sub, dot_general, reduce_sum) may cancel, keeping an error the size of its terms:
// `cancelled`; moving it around keeps that, but any other function of it (exp, tanh, a product, a
// compare...) may turn the error into anything: `unstable`, as are integers and preds made from
// rounded floats (a step apart at a boundary) and everything computed from an unstable value.
struct Lineage {
  std::set<int64_t> rounded, cancelled, unstable;

  void Add(const std::string& opcode, const std::vector<int64_t>& operands, int64_t result,
           DType dtype) {
    auto any = [&](const std::set<int64_t>& s) {
      return std::any_of(operands.begin(), operands.end(),
                         [&](int64_t v) { return s.count(v) > 0; });
    };
    static const std::set<std::string> kSums = {"add", "sub", "dot_general", "reduce_sum"};
    static const std::set<std::string> kMoves = {
        "slice",  "transpose", "broadcast_in_dim", "reshape",    "concatenate", "neg", "abs",
        "max",    "min",       "reduce_max",       "reduce_min", "select",      "convert_element_type"};
    const bool is_float = ir::IsFloating(dtype);
    if (any(unstable) || (!is_float && any(rounded)) ||
        (any(cancelled) && kMoves.count(opcode) == 0 && kSums.count(opcode) == 0)) {
      unstable.insert(result);
    } else if (is_float) {
      rounded.insert(result);
      if (any(cancelled) || (kSums.count(opcode) > 0 && any(rounded))) cancelled.insert(result);
    }
  }
};

[[noreturn]] void Fail(const std::string& what, const ir::Module& module) {
  std::fprintf(stderr, "%s\n%s\n", what.c_str(), ir::PrintModule(module).c_str());
  std::abort();
}

}  // namespace
}  // namespace shardjit

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardjit;
  Bytes in(data, size);
  ir::Module module;
  module.set_name("fuzz");
  module.set_view(ir::PER_DEVICE);
  module.set_entry("main");
  ir::MeshAxis* axis = module.mutable_mesh()->add_axes();
  axis->set_name("x");
  axis->set_size(1);
  module.mutable_mesh()->add_device_ids(0);
  ir::FunctionBuilder b(&module.mesh(), /*per_device=*/true);
  std::vector<int64_t> values;
  std::vector<ir::ShapedType> param_types;
  for (int64_t i = 0, n = 1 + in.Pick(3); i < n; ++i) {
    param_types.push_back(RandomType(in));
    values.push_back(b.AddParam(param_types.back()));
  }
  Lineage lineage;
  for (int64_t i = 0, n = in.Pick(24); i < n && !in.empty(); ++i) {
    std::vector<int64_t> operands;
    ir::Op op = RandomOp(in, b, values, operands);
    const std::string opcode = op.opcode();
    absl::StatusOr<std::vector<int64_t>> results = b.AddOp(std::move(op), operands);
    if (!results.ok()) continue;
    for (int64_t r : *results) lineage.Add(opcode, operands, r, b.TypeOf(r).dtype);
    values.insert(values.end(), results->begin(), results->end());
  }
  // Elements past this make the reference backend slow; such programs prove nothing more.
  for (int64_t v : values) {
    if (b.TypeOf(v).num_elements() > (int64_t{1} << 16)) return 0;
  }
  std::vector<int64_t> results(values.end() - std::min<size_t>(values.size(), 3), values.end());
  *module.add_functions() = b.Finish("main", results);
  if (absl::Status s = ir::VerifyModule(module); !s.ok()) {
    Fail("the builder made a module that does not verify: " + std::string(s.message()), module);
  }
  std::vector<Tensor> inputs;
  for (const ir::ShapedType& t : param_types) inputs.push_back(RandomInput(in, t));

  HostDevice device;
  absl::StatusOr<std::unique_ptr<backends::Executable>> ref =
      backends::reference::Compile(module.functions(0));
  if (!ref.ok()) Fail("reference compile: " + std::string(ref.status().message()), module);
  absl::StatusOr<std::vector<Tensor>> want = (*ref)->Run(inputs, device);

  ir::Module fused = module;
  if (absl::StatusOr<bool> s = passes::FuseElementwise().Run(fused); !s.ok()) {
    Fail("fuse-elementwise: " + std::string(s.status().message()), module);
  }
  absl::StatusOr<std::unique_ptr<backends::Executable>> x86 =
      backends::x86::Compile(fused.functions(0));
  if (!x86.ok()) Fail("x86 compile: " + std::string(x86.status().message()), fused);
  absl::StatusOr<std::vector<Tensor>> got = (*x86)->Run(inputs, device);
  if (want.ok() != got.ok()) {
    Fail("reference: " + std::string(want.status().message()) +
             "; x86: " + std::string(got.status().message()),
         fused);
  }
  if (!want.ok()) return 0;
  for (size_t r = 0; r < want->size(); ++r) {
    const Tensor& w = (*want)[r];
    const Tensor& g = (*got)[r];
    if (w.type() != g.type()) Fail("result " + std::to_string(r) + " types differ", fused);
    if (lineage.unstable.count(results[r]) > 0) continue;
    const std::vector<double> wv = w.ToDoubles(), gv = g.ToDoubles();
    double scale = 0;
    for (double v : wv) {
      if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
    }
    for (size_t i = 0; i < wv.size(); ++i) {
      if (!Agree(wv[i], gv[i], w.dtype(), scale)) {
        Fail("result " + std::to_string(r) + " element " + std::to_string(i) + ": reference " +
                 std::to_string(wv[i]) + ", x86 " + std::to_string(gv[i]),
             fused);
      }
    }
  }
  return 0;
}
