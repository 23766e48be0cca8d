// Early returns on error, for functions that return absl::Status or absl::StatusOr<T>:
//
//   RETURN_IF_ERROR(VerifyModule(module));
//   ASSIGN_OR_RETURN(ir::Module lowered, Lower(traced));
//
// RETURN_IF_ERROR evaluates its argument once and returns the status if it is not OK.
// ASSIGN_OR_RETURN evaluates a StatusOr once, returns its status if not OK, else moves its value
// into the left-hand side (a declaration or an existing variable).
#ifndef SHARDJIT_BASE_STATUS_MACROS_H_
#define SHARDJIT_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(expr)                                                \
  do {                                                                       \
    if (::absl::Status shardjit_status_ = (expr); !shardjit_status_.ok()) {  \
      return shardjit_status_;                                               \
    }                                                                        \
  } while (false)

#define SHARDJIT_STATUS_CONCAT_INNER_(a, b) a##b
#define SHARDJIT_STATUS_CONCAT_(a, b) SHARDJIT_STATUS_CONCAT_INNER_(a, b)

#define ASSIGN_OR_RETURN(lhs, expr) \
  SHARDJIT_ASSIGN_OR_RETURN_IMPL_(SHARDJIT_STATUS_CONCAT_(shardjit_statusor_, __LINE__), lhs, expr)

#define SHARDJIT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = *std::move(statusor)

#endif  // SHARDJIT_BASE_STATUS_MACROS_H_
