// The headers most of the project's translation units include, precompiled once per
// configuration (//bazel:common_pch): the standard library, Abseil, fmt, protobuf and the IR's
// generated header. A change to one of them rebuilds everything that uses them anyway.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fmt/format.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_field.h"
#include "ir/ir.pb.h"
