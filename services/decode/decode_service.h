// DecodeService: the Decode gRPC API, a thin adapter over one engine
// DecodeLoop per model (engine/runtime/decode_loop.h):
//
//   Generate handler: load the state (through the shared StateCache, so
//   concurrent questions on one document load it once), read the request's
//   read tokens (a second read of the document, an as-of tail, a prefix
//   encoding) and then its prompt on the handler thread, submit the
//   sequence to the model's loop, then stream the loop's events back.
//   What the handler reads lives only in the call: no state is stored.
//   Loop thread: samples every active sequence's next token and reads them
//   all in one batched model step, so concurrent calls share each pass over
//   the weights.
//
// A cancelled call (client gone, deadline, or the orchestrator's public call
// cancelled) is seen by the loop before the sequence's next token and
// decodes nothing more.
#ifndef TWICE_SERVICES_DECODE_DECODE_SERVICE_H_
#define TWICE_SERVICES_DECODE_DECODE_SERVICE_H_

#include <map>
#include <memory>
#include <string>

#include "engine/runtime/decode_loop.h"
#include "services/common/auth.h"
#include "services/common/model_registry.h"
#include "services/common/state_cache.h"
#include "storage/store.h"
#include "twice/v1/decode.grpc.pb.h"

namespace twice::services {

struct DecodeLimits {
  // Default generated tokens when a request sets none. Default: 64.
  int32_t default_max_tokens = 64;
  // Largest max_tokens a request may ask for. Default: 4096.
  int32_t max_new_tokens = 4096;
  // Largest prompt. Default: 65536 tokens.
  int64_t max_prompt_tokens = 65536;
  // Most read_tokens a request may carry: a second read holds the document
  // (read-twice) or twice it (read_twice_full). Default: 2^23 + 2^16
  // (twice the default max_document_tokens, plus room for the question).
  int64_t max_read_tokens = (int64_t{1} << 23) + (int64_t{1} << 16);
  // Tokens read per engine call of a long read, between which a cancelled
  // call stops. Default: 8192.
  int64_t read_chunk_tokens = 8192;
  // Most sequences one batched decode step reads. Default: 64.
  int max_batch = 64;
  // Bytes of decoded document states kept in memory for reuse by later and
  // concurrent questions. Default: 256 MiB.
  int64_t state_cache_bytes = int64_t{256} << 20;
};

class DecodeService final : public v1::Decode::Service {
 public:
  // `models` (already loaded) and `store` must outlive the service. Starts
  // one decode loop per model.
  DecodeService(const ModelRegistry* models, storage::Store* store,
                DecodeLimits limits);
  ~DecodeService() override;

  grpc::Status Generate(
      grpc::ServerContext* context, const v1::GenerateRequest* request,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Stats(grpc::ServerContext* context,
                     const v1::DecodeStatsRequest* request,
                     v1::DecodeStats* response) override;

  // Authenticates every call (services/common/auth.h): internal peers
  // only. nullptr (the default) = no checks. `auth` must outlive the
  // service; call before serving.
  void SetAuthenticator(Authenticator* auth) { auth_ = auth; }

 private:
  // Reads `tokens` into `state` in chunks of limits_.read_chunk_tokens,
  // stopping with CANCELLED between chunks once the call is cancelled. In
  // a prefix mode the first chunk covers the whole encoder, so the result
  // equals one read of all tokens.
  [[nodiscard]] absl::Status ReadInChunks(
      const engine::Model& model, absl::Span<const int32_t> tokens,
      engine::PrefillMode mode, engine::SequenceState& state,
      const grpc::ServerContext& context) const;

  const ModelRegistry* models_;
  storage::Store* store_;
  Authenticator* auth_ = nullptr;
  DecodeLimits limits_;
  StateCache cache_;
  // By model name; filled in the constructor, then read-only.
  std::map<std::string, std::unique_ptr<engine::DecodeLoop>, std::less<>>
      loops_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_DECODE_DECODE_SERVICE_H_
