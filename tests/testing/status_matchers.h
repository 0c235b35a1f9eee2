// Assertions on absl::Status and absl::StatusOr<T> that print the status
// when they fail:
//
//   ASSERT_OK(store.PutState(key, blob, {}));
//   EXPECT_OK(status);
//   ASSERT_OK_AND_ASSIGN(std::string blob, store.GetState(key));
//   ASSERT_OK_AND_ASSIGN(auto model, LoadModel(dir));
//
// ASSERT_OK_AND_ASSIGN declares (or assigns) its left side from the value
// of an OK StatusOr and returns from the test otherwise, so it can only be
// used where ASSERT_* can (a void function).
#ifndef TWICE_TESTS_TESTING_STATUS_MATCHERS_H_
#define TWICE_TESTS_TESTING_STATUS_MATCHERS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace twice::testing {

inline const absl::Status& StatusOf(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

}  // namespace twice::testing

#define TWICE_STATUS_CONCAT_INNER(a, b) a##b
#define TWICE_STATUS_CONCAT(a, b) TWICE_STATUS_CONCAT_INNER(a, b)

// Each evaluates `expr` once (it is often a call with side effects) and
// keeps a copy of the status, which may live in a temporary StatusOr.
#define TWICE_CHECK_OK_(expr, fail)                                            \
  switch (0)                                                                   \
  case 0:                                                                      \
  default:                                                                     \
    if (const ::absl::Status twice_status_ = ::twice::testing::StatusOf(expr); \
        twice_status_.ok()) {                                                  \
    } else                                                                     \
      fail << "Expected OK: " #expr "\n  Actual: " << twice_status_
#define ASSERT_OK(expr) TWICE_CHECK_OK_(expr, FAIL())
#define EXPECT_OK(expr) TWICE_CHECK_OK_(expr, ADD_FAILURE())

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  TWICE_ASSERT_OK_AND_ASSIGN_IMPL(       \
      TWICE_STATUS_CONCAT(twice_status_or_, __LINE__), lhs, rexpr)
#define TWICE_ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, rexpr)     \
  auto statusor = (rexpr);                                        \
  ASSERT_TRUE(statusor.ok()) << #rexpr ": " << statusor.status(); \
  lhs = std::move(statusor).value()

#endif  // TWICE_TESTS_TESTING_STATUS_MATCHERS_H_
