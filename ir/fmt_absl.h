// Lets fmt format absl::string_view (a distinct type from std::string_view in Debian's Abseil),
// e.g. the message of an absl::Status.
#ifndef SHARDJIT_IR_FMT_ABSL_H_
#define SHARDJIT_IR_FMT_ABSL_H_

#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"
#include "fmt/format.h"

#if !defined(ABSL_USES_STD_STRING_VIEW)
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
#endif

#endif  // SHARDJIT_IR_FMT_ABSL_H_
