#include "services/server/internal_only_services.h"

#include <string>

#include "absl/status/status.h"
#include "services/common/grpc_status.h"

namespace twice::services {
namespace {

grpc::Status NotServedHere(const char* service) {
  return ToGrpcStatus(absl::PermissionDeniedError(
      std::string(service) +
      " is an internal service and is not served on this listener "
      "(role all runs it in process, or on --internal_listen for "
      "internal peers); call twice.v1.Orchestrator"));
}

}  // namespace

grpc::Status RefusingPrefillService::Prefill(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<v1::PrefillResponse,
                             v1::PrefillRequest>* /*stream*/) {
  return NotServedHere("twice.v1.Prefill");
}

grpc::Status RefusingPrefillService::DescribeModels(
    grpc::ServerContext* /*context*/,
    const v1::DescribeModelsRequest* /*request*/,
    v1::DescribeModelsResponse* /*response*/) {
  return NotServedHere("twice.v1.Prefill");
}

grpc::Status RefusingDecodeService::Generate(
    grpc::ServerContext* /*context*/, const v1::GenerateRequest* /*request*/,
    grpc::ServerWriter<v1::GenerateResponse>* /*writer*/) {
  return NotServedHere("twice.v1.Decode");
}

grpc::Status RefusingDecodeService::Stats(
    grpc::ServerContext* /*context*/, const v1::DecodeStatsRequest* /*request*/,
    v1::DecodeStats* /*response*/) {
  return NotServedHere("twice.v1.Decode");
}

}  // namespace twice::services
