// ASSERT_OK and EXPECT_OK (status_matchers.h) for grpc::Status too, so a
// failed call prints its code and message:
//
//   ASSERT_OK(stream->Finish());
#ifndef TWICE_TESTS_TESTING_GRPC_STATUS_MATCHERS_H_
#define TWICE_TESTS_TESTING_GRPC_STATUS_MATCHERS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "tests/testing/status_matchers.h"

namespace twice::testing {

// gRPC's codes are absl's, number for number.
inline absl::Status StatusOf(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace twice::testing

#endif  // TWICE_TESTS_TESTING_GRPC_STATUS_MATCHERS_H_
