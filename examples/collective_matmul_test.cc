// Seed 001 by hand (examples/collective_matmul.h): the bidirectional collective matmul gives the
// f64 product on rings of 1 to 8 devices (odd and even: with and without the last one-way hop)
// and over one axis of a 2-D mesh; its program has the ring's futures (carried through the loop
// for rings of more than 4) and never gathers x.
#include <cmath>

#include "examples/collective_matmul.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::examples {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct RingCase {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::string ring;
};

class CollectiveMatmulTest : public ::testing::TestWithParam<RingCase> {};

TEST_P(CollectiveMatmulTest, MatchesF64) {
  const RingCase& c = GetParam();
  int64_t devices = 1;
  for (const auto& [name, size] : c.axes) devices *= size;
  Runtime rt({.num_devices = static_cast<int>(devices)});
  Mesh mesh = *make_mesh(rt, c.axes);
  const int64_t n = mesh.axis_size(c.ring);
  const int64_t m = 3 * n, k = 37, cols = 5 * n;
  Tensor x_host = *random::normal(random::key(3), {m, k}, DType::kBF16);
  Tensor w_host = *random::normal(random::key(4), {k, cols}, DType::kBF16);
  Array x = *device_put(x_host, NamedSharding(mesh, P(c.ring, None)));
  Array w = *device_put(w_host, NamedSharding(mesh, P(None, c.ring)));
  auto f = BidirectionalCollectiveMatmul(mesh, c.ring);
  absl::StatusOr<Array> out = f(x, w);
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor got = *out->to_host();
  ASSERT_EQ(got.type(), (ShapedType{DType::kF32, {m, cols}}));
  std::vector<double> xd = x_host.ToDoubles(), wd = w_host.ToDoubles();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double want = 0;
      for (int64_t l = 0; l < k; ++l) want += xd[i * k + l] * wd[l * cols + j];
      ASSERT_NEAR(got.GetDouble(i * cols + j), want, 1e-4 + 1e-5 * std::abs(want))
          << "element " << i << "," << j;
    }
  }
  auto lowered = f.lower(x, w);
  ASSERT_TRUE(lowered.ok());
  const std::string text = lowered->as_text();
  EXPECT_THAT(text, Not(HasSubstr("all_gather")));
  if (n > 1) {
    EXPECT_THAT(text, HasSubstr("ppermute_start"));
  }
  if (n > 4) {
    EXPECT_THAT(text, HasSubstr("fori_loop"));
  }
}

INSTANTIATE_TEST_SUITE_P(Rings, CollectiveMatmulTest,
                         ::testing::Values(RingCase{{{"i", 1}}, "i"}, RingCase{{{"i", 2}}, "i"},
                                           RingCase{{{"i", 3}}, "i"}, RingCase{{{"i", 4}}, "i"},
                                           RingCase{{{"i", 5}}, "i"}, RingCase{{{"i", 8}}, "i"},
                                           RingCase{{{"x", 2}, {"y", 4}}, "y"},
                                           RingCase{{{"x", 4}, {"y", 3}}, "x"}));

}  // namespace
}  // namespace shardjit::examples
