#include "base/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace shardjit::base {
namespace {

absl::Status Check(int x, int* evaluations) {
  ++*evaluations;
  return x > 0 ? absl::OkStatus() : absl::InvalidArgumentError("x must be positive");
}

absl::StatusOr<std::unique_ptr<std::string>> Make(int x) {
  if (x < 0) return absl::NotFoundError("negative");
  return std::make_unique<std::string>(std::to_string(x));
}

absl::Status Both(int x, int* evaluations, std::string* out) {
  RETURN_IF_ERROR(Check(x, evaluations));
  ASSIGN_OR_RETURN(std::unique_ptr<std::string> made, Make(x - 2));  // move-only values
  *out = *made;
  std::unique_ptr<std::string> again;
  ASSIGN_OR_RETURN(again, Make(x - 1));  // into an existing variable
  *out += "," + *again;
  return absl::OkStatus();
}

TEST(StatusMacros, ReturnTheFirstErrorAndEvaluateOnce) {
  int evaluations = 0;
  std::string out;
  EXPECT_EQ(Both(0, &evaluations, &out).message(), "x must be positive");
  EXPECT_EQ(evaluations, 1);
  EXPECT_EQ(Both(1, &evaluations, &out).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(evaluations, 2);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(Both(3, &evaluations, &out).ok());
  EXPECT_EQ(out, "1,2");
}

}  // namespace
}  // namespace shardjit::base
