// Adapts user callables over tracers (any number of Tracer parameters, returning a Tracer, a
// std::vector<Tracer> or a std::tuple of Tracers) to one form: vector in, vector out. What the
// callable returns decides what jit and shard_map return: one Tracer gives one result (an Array,
// a Tracer), anything else a vector.
#ifndef SHARDJIT_FRONTEND_TRACED_FUNCTION_H_
#define SHARDJIT_FRONTEND_TRACED_FUNCTION_H_

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/tracer.h"

namespace shardjit {

struct TracedFunction {
  std::function<std::vector<Tracer>(const std::vector<Tracer>&)> fn;
  // Number of parameters; -1 when the callable takes a vector (any number).
  int arity = -1;
};

namespace internal {

template <typename T>
struct CallTraits : CallTraits<decltype(&T::operator())> {};
template <typename C, typename R, typename... A>
struct CallTraits<R (C::*)(A...) const> {
  static constexpr int arity = sizeof...(A);
  using Result = R;
};
template <typename C, typename R, typename... A>
struct CallTraits<R (C::*)(A...)> {
  static constexpr int arity = sizeof...(A);
  using Result = R;
};
template <typename R, typename... A>
struct CallTraits<R (*)(A...)> {
  static constexpr int arity = sizeof...(A);
  using Result = R;
};
template <typename R, typename... A>
struct CallTraits<R(A...)> : CallTraits<R (*)(A...)> {};

// What F returns when traced.
template <typename F, bool kTakesVector>
struct TracedResultOf {
  using type = std::invoke_result_t<F, const std::vector<Tracer>&>;
};
template <typename F>
struct TracedResultOf<F, false> {
  using type = typename CallTraits<std::decay_t<F>>::Result;
};

inline std::vector<Tracer> ToTracers(Tracer t) { return {std::move(t)}; }
inline std::vector<Tracer> ToTracers(std::vector<Tracer> v) { return v; }
template <typename... T>
std::vector<Tracer> ToTracers(std::tuple<T...> t) {
  return std::apply([](auto&&... x) { return std::vector<Tracer>{Tracer(x)...}; }, std::move(t));
}

}  // namespace internal

// Whether the callable F returns one Tracer (then jit gives one Array, shard_map one Tracer).
template <typename F>
inline constexpr bool kReturnsOneTracer =
    std::is_same_v<std::decay_t<typename internal::TracedResultOf<
                       F, std::is_invocable_v<F, const std::vector<Tracer>&>>::type>,
                   Tracer>;

template <typename F>
TracedFunction MakeTracedFunction(F f) {
  if constexpr (std::is_invocable_v<F, const std::vector<Tracer>&>) {
    return {[f](const std::vector<Tracer>& args) { return internal::ToTracers(f(args)); }, -1};
  } else {
    constexpr int n = internal::CallTraits<std::decay_t<F>>::arity;
    return {[f](const std::vector<Tracer>& args) {
              return [&]<size_t... I>(std::index_sequence<I...>) {
                return internal::ToTracers(f(args[I]...));
              }(std::make_index_sequence<n>{});
            },
            n};
  }
}

}  // namespace shardjit

#endif  // SHARDJIT_FRONTEND_TRACED_FUNCTION_H_
