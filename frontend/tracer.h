// Tracer: a handle to a value of the program being traced (like a JAX tracer). Primitives
// applied to tracers append ops to the trace (frontend/trace_state.h) through the IR builder, so the tracer, builder
// and verifier share one shape rule per primitive. Errors do not throw: the first one is
// recorded in the trace and returned by jit/lower, and later ops on its results are skipped.
#ifndef SHARDJIT_FRONTEND_TRACER_H_
#define SHARDJIT_FRONTEND_TRACER_H_

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "frontend/array.h"
#include "frontend/sharding.h"

namespace shardjit {

namespace internal {
class TraceState;
}  // namespace internal

class Tracer {
 public:
  Tracer() = default;

  bool valid() const { return state_ != nullptr; }
  const ShapedType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<int64_t>& shape() const { return type_.dims; }
  int64_t rank() const { return type_.rank(); }

  internal::TraceState* state() const { return state_; }
  int64_t id() const { return id_; }

 private:
  friend class internal::TraceState;
  Tracer(internal::TraceState* state, int64_t id, ShapedType type)
      : state_(state), id_(id), type_(std::move(type)) {}

  internal::TraceState* state_ = nullptr;
  int64_t id_ = -1;
  ShapedType type_;
};

// One or several mesh axis names: psum(x, "y"), psum(x, {"x", "y"}).
struct AxisNames {
  AxisNames(const char* name) : names{name} {}
  AxisNames(std::string name) : names{std::move(name)} {}
  AxisNames(std::initializer_list<std::string> list) : names(list) {}
  AxisNames(std::vector<std::string> list) : names(std::move(list)) {}
  std::vector<std::string> names;
};

// A start index: a traced integer scalar (any integer dtype) or a constant.
struct Index {
  Index(Tracer t) : tracer(std::move(t)) {}
  Index(int v) : value(v) {}
  Index(int64_t v) : value(v) {}
  Tracer tracer;
  int64_t value = 0;
};

using AxisIndexGroups = std::vector<std::vector<int64_t>>;
using SourceLocation = std::source_location;

// Names the ops traced in its lifetime (nested scopes join with '/'), like jax.named_scope.
class NamedScope {
 public:
  explicit NamedScope(std::string name);
  ~NamedScope();
  NamedScope(const NamedScope&) = delete;
  NamedScope& operator=(const NamedScope&) = delete;

 private:
  internal::TraceState* state_;
};

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_TRACER_H_
