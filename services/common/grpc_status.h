// The one place where absl::Status and grpc::Status are converted. Codes map
// one to one (both follow google.rpc.Code), so "try again" (UNAVAILABLE)
// stays apart from "data is bad" (DATA_LOSS) across process boundaries.
#ifndef TWICE_SERVICES_COMMON_GRPC_STATUS_H_
#define TWICE_SERVICES_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace twice::services {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// INVALID_ARGUMENT with `message`: the answer to a malformed request.
grpc::Status InvalidRequest(const std::string& message);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_GRPC_STATUS_H_
