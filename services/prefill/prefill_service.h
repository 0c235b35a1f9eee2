// PrefillService: the Prefill gRPC API. Reads the streamed tokens segment by
// segment as they arrive (a long document never has to be held twice) and
// reports each stored checkpoint.
#ifndef TWICE_SERVICES_PREFILL_PREFILL_SERVICE_H_
#define TWICE_SERVICES_PREFILL_PREFILL_SERVICE_H_

#include "services/common/auth.h"
#include "services/common/model_registry.h"
#include "services/common/state_cache.h"
#include "storage/store.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {

class PrefillService final : public v1::Prefill::Service {
 public:
  // `models` and `store` must outlive the service. Parent states (document
  // boundaries that second reads, appends and as-of tails start from) are
  // kept decoded in a cache of `state_cache_bytes`, so the questions of a
  // batch load their document state once. Default: 256 MiB.
  PrefillService(const ModelRegistry* models, storage::Store* store,
                 int64_t state_cache_bytes = int64_t{256} << 20)
      : models_(models), store_(store), cache_(state_cache_bytes) {}

  grpc::Status Prefill(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::PrefillResponse, v1::PrefillRequest>* stream)
      override;
  // The models this process serves, as the orchestrator's model cards
  // need them (model_cards.h).
  grpc::Status DescribeModels(grpc::ServerContext* context,
                              const v1::DescribeModelsRequest* request,
                              v1::DescribeModelsResponse* response) override;

  // Authenticates every call (services/common/auth.h): internal peers
  // only. nullptr (the default) = no checks. `auth` must outlive the
  // service; call before serving.
  void SetAuthenticator(Authenticator* auth) { auth_ = auth; }

 private:
  const ModelRegistry* models_;
  storage::Store* store_;
  Authenticator* auth_ = nullptr;
  StateCache cache_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_PREFILL_PREFILL_SERVICE_H_
