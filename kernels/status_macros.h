// Status propagation macros. Kernels are the lowest library, so the engine
// shares these rather than defining its own.
#ifndef TWICE_KERNELS_STATUS_MACROS_H_
#define TWICE_KERNELS_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TWICE_STATUS_CONCAT_INNER_(a, b) a##b
#define TWICE_STATUS_CONCAT_(a, b) TWICE_STATUS_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function unless it is OK.
#define TWICE_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    if (::absl::Status twice_status_ = (expr); !twice_status_.ok()) { \
      return twice_status_;                                           \
    }                                                                 \
  } while (false)

// `lhs = value of expr` or returns its error status.
#define TWICE_ASSIGN_OR_RETURN(lhs, expr) \
  TWICE_ASSIGN_OR_RETURN_IMPL_(           \
      TWICE_STATUS_CONCAT_(twice_statusor_, __LINE__), lhs, expr)

#define TWICE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // TWICE_KERNELS_STATUS_MACROS_H_
