#include "backends/x86/elementwise_test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"
#include "ir/fmt_absl.h"
#include "ir/parser.h"
#include "ir/types.h"
#include "ir/verifier.h"

namespace shardjit::backends::x86 {
namespace {

using ir::DType;

float RandomFloat(std::mt19937& rng) {
  static const float kSpecials[] = {
      0.0f,          -0.0f,          NAN,           -NAN,          INFINITY,
      -INFINITY,     1e-40f,         -1e-40f,       3.4028235e38f, 1.17549435e-38f,
      2147483648.0f, -2147483648.0f, 2147483520.0f, 0.5f,          -0.5f,
      88.8f};
  std::normal_distribution<float> normal(0.0f, 3.0f);
  switch (rng() % 8) {
    case 0:
      return kSpecials[rng() % std::size(kSpecials)];
    case 1: {
      const uint32_t bits = rng();
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case 2:
      return static_cast<float>(static_cast<int>(rng() % 7) - 3);
    default:
      return normal(rng);
  }
}

int32_t RandomS32(std::mt19937& rng) {
  static const int32_t kSpecials[] = {std::numeric_limits<int32_t>::min(),
                                      std::numeric_limits<int32_t>::max(), -1, 0, 1};
  switch (rng() % 4) {
    case 0:
      return kSpecials[rng() % std::size(kSpecials)];
    case 1:
      return static_cast<int32_t>(rng());
    default:
      return static_cast<int32_t>(rng() % 201) - 100;
  }
}

int64_t Ordered(uint32_t bits, int sign_shift) {
  const uint32_t magnitude = bits & ((1u << sign_shift) - 1);
  return (bits >> sign_shift) & 1 ? -static_cast<int64_t>(magnitude) : magnitude;
}

}  // namespace

ir::Op FusionOp(const std::string& params, const std::string& fusion_line, int64_t n) {
  std::string text = absl::StrReplaceAll(
      "module m [view=per_device mesh={x:1} devices=(0) entry=main]\n"
      "func main = { lambda ; " +
          params + ". let\n    " + fusion_line + "\n  in (z) }\n",
      {{"[N]", "[" + std::to_string(n) + "]"}, {"(N)", "(" + std::to_string(n) + ")"}});
  absl::StatusOr<ir::Module> m = ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return ir::Op();
  EXPECT_TRUE(ir::VerifyModule(*m).ok()) << ir::VerifyModule(*m) << "\n" << text;
  return m->functions(0).body().ops(0);
}

ir::Tensor RandomTensor(const ir::ShapedType& type, uint32_t seed) {
  ir::Tensor t = ir::Tensor::Empty(type);
  std::mt19937 rng(seed);
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (type.dtype) {
      case DType::kF32:
        t.data_as<float>()[i] = RandomFloat(rng);
        break;
      case DType::kBF16:
        t.data_as<ir::bf16>()[i].bits =
            rng() % 8 == 0 ? static_cast<uint16_t>(rng()) : ir::bf16::FromFloat(RandomFloat(rng));
        break;
      case DType::kS32:
        t.data_as<int32_t>()[i] = RandomS32(rng);
        break;
      default:
        t.data_as<uint8_t>()[i] = rng() & 1;
        break;
    }
  }
  return t;
}

std::vector<ir::Tensor> RandomOperands(const ir::Op& op, uint32_t seed, ir::Allocator* allocator) {
  std::vector<ir::Tensor> out;
  for (const ir::Param& p : op.fusion().body().params()) {
    out.push_back(RandomTensor(ir::FromProto(p.type()), seed++).Copy(allocator));
  }
  return out;
}

int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  }
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return std::llabs(Ordered(ua, 31) - Ordered(ub, 31));
}

int64_t UlpDistanceBf16(uint16_t a, uint16_t b) {
  if (std::isnan(ir::bf16::ToFloat(a)) || std::isnan(ir::bf16::ToFloat(b))) {
    return UlpDistance(ir::bf16::ToFloat(a), ir::bf16::ToFloat(b));
  }
  return std::llabs(Ordered(a, 15) - Ordered(b, 15));
}

std::vector<bool> OpenNanLanes(NanRule rule, const std::vector<ir::Tensor>& operands, int64_t n) {
  std::vector<bool> open(n, rule == NanRule::kOpen);
  if (rule != NanRule::kOpenWhereTwoNans) return open;
  std::vector<int> nans(n, 0);
  for (const ir::Tensor& t : operands) {
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) continue;
    for (int64_t i = 0; i < n; ++i) {
      nans[i] += std::isnan(t.GetDouble(t.num_elements() == 1 ? 0 : i)) ? 1 : 0;
    }
  }
  for (int64_t i = 0; i < n; ++i) open[i] = nans[i] >= 2;
  return open;
}

void ExpectClose(const ir::Tensor& got, const ir::Tensor& want, int64_t max_ulp,
                 const std::string& what, const std::vector<bool>& open_nan) {
  ASSERT_EQ(got.type(), want.type()) << what;
  if (want.byte_size() == 0 || std::memcmp(got.data(), want.data(), want.byte_size()) == 0) return;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    int64_t ulp = 0;
    switch (want.dtype()) {
      case DType::kF32:
        ulp = UlpDistance(got.data_as<float>()[i], want.data_as<float>()[i]);
        break;
      case DType::kBF16:
        ulp = UlpDistanceBf16(got.data_as<ir::bf16>()[i].bits, want.data_as<ir::bf16>()[i].bits);
        break;
      case DType::kS32:
        ulp = got.data_as<int32_t>()[i] == want.data_as<int32_t>()[i] ? 0 : 1;
        break;
      default:
        ulp = got.data_as<uint8_t>()[i] == want.data_as<uint8_t>()[i] ? 0 : 1;
        break;
    }
    const bool any_nan = !open_nan.empty() && open_nan[i] && std::isnan(got.GetDouble(i)) &&
                         std::isnan(want.GetDouble(i));
    const bool bits_differ =
        std::memcmp(static_cast<const char*>(got.data()) + i * ir::DTypeSize(want.dtype()),
                    static_cast<const char*>(want.data()) + i * ir::DTypeSize(want.dtype()),
                    ir::DTypeSize(want.dtype())) != 0;
    if (!any_nan && ((max_ulp == 0 && bits_differ) || ulp > max_ulp)) {
      ADD_FAILURE() << what << ": first difference at " << i << " of " << want.num_elements()
                    << ": got " << got.GetDouble(i) << ", want " << want.GetDouble(i) << " (" << ulp
                    << " ulp, allowed " << max_ulp << ")";
      return;
    }
  }
}

}  // namespace shardjit::backends::x86
