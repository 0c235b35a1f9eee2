// DecodeService: the Decode gRPC API. Resumes from a stored state, reads the
// prompt and streams generated tokens. Each call runs on its own gRPC thread
// against the shared read-only model; a cancelled call stops generating at
// the next token. (Batching concurrent sequences step by step into one
// engine loop comes with the orchestrator issue.)
#ifndef TWICE_SERVICES_DECODE_DECODE_SERVICE_H_
#define TWICE_SERVICES_DECODE_DECODE_SERVICE_H_

#include "services/common/model_registry.h"
#include "storage/state_store.h"
#include "twice/v1/decode.grpc.pb.h"

namespace twice::services {

struct DecodeLimits {
  // Default generated tokens when a request sets none. Default: 64.
  int32_t default_max_tokens = 64;
  // Largest max_tokens a request may ask for. Default: 4096.
  int32_t max_new_tokens = 4096;
  // Largest prompt. Default: 65536 tokens.
  int64_t max_prompt_tokens = 65536;
};

class DecodeService final : public v1::Decode::Service {
 public:
  // `models` and `store` must outlive the service.
  DecodeService(const ModelRegistry* models, storage::StateStore* store,
                DecodeLimits limits)
      : models_(models), store_(store), limits_(limits) {}

  grpc::Status Generate(
      grpc::ServerContext* context, const v1::GenerateRequest* request,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override;

 private:
  const ModelRegistry* models_;
  storage::StateStore* store_;
  DecodeLimits limits_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_DECODE_DECODE_SERVICE_H_
