// What role all's public listener answers for the internal services.
//
// Prefill and Decode trust the tenant named in their requests, so they run
// only on role all's internal server (in process, and on --internal_listen
// for internal peers). On the public listener they are still registered,
// so a caller meets a clear PERMISSION_DENIED naming the service instead of
// UNIMPLEMENTED, which reads like a version mismatch. The Store's public
// face is StoreService with serve_data = false (admin RPCs only).
#ifndef TWICE_SERVICES_SERVER_INTERNAL_ONLY_SERVICES_H_
#define TWICE_SERVICES_SERVER_INTERNAL_ONLY_SERVICES_H_

#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {

// Every call: PERMISSION_DENIED. Stateless; safe from any thread.
class RefusingPrefillService final : public v1::Prefill::Service {
 public:
  grpc::Status Prefill(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::PrefillResponse, v1::PrefillRequest>* stream)
      override;
  grpc::Status DescribeModels(grpc::ServerContext* context,
                              const v1::DescribeModelsRequest* request,
                              v1::DescribeModelsResponse* response) override;
};

// Every call: PERMISSION_DENIED. Stateless; safe from any thread.
class RefusingDecodeService final : public v1::Decode::Service {
 public:
  grpc::Status Generate(
      grpc::ServerContext* context, const v1::GenerateRequest* request,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Stats(grpc::ServerContext* context,
                     const v1::DecodeStatsRequest* request,
                     v1::DecodeStats* response) override;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_SERVER_INTERNAL_ONLY_SERVICES_H_
