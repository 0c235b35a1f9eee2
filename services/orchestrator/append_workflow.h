// AppendWorkflow: one Append call. Reads only the new tokens, starting from
// the document's last state (recomputed if it was lost), and commits the
// longer record conditionally on the one read. Appends through this process
// to one document queue on its lock; one that loses to an append through
// another orchestrator replica (ABORTED) reads the document again and
// appends after the winner's tokens.
#ifndef TWICE_SERVICES_ORCHESTRATOR_APPEND_WORKFLOW_H_
#define TWICE_SERVICES_ORCHESTRATOR_APPEND_WORKFLOW_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/orchestrator/workflow_context.h"
#include "storage/document_record.h"
#include "twice/v1/orchestrator.pb.h"

namespace twice::services {

class AppendWorkflow {
 public:
  // For a call of `tenant` (authenticated and admitted by the caller).
  AppendWorkflow(const WorkflowContext& context, std::string tenant)
      : context_(context), tenant_(std::move(tenant)) {}

  // Streams progress after every stored segment and ends with the
  // document's DocumentInfo.
  grpc::Status Run(
      grpc::ServerContext& server,
      grpc::ServerReaderWriter<v1::IngestResponse, v1::AppendRequest>& stream);

 private:
  // What one committed append wrote.
  struct Appended {
    storage::DocumentRecord record;  // as committed, at its new revision
    int64_t tokens_computed = 0;
    int64_t segments_reused = 0;
  };
  // One attempt of an Append of `appended` onto `record` as read: plans the
  // segments (and charges the tenant when `charge`), prefills from the
  // document's last state and commits the new record conditionally on the
  // revision read. ABORTED when another writer changed the document
  // meanwhile: the caller reads it again and retries.
  absl::StatusOr<Appended> AppendOnce(
      grpc::ServerContext& server, const storage::DocumentRecord& record,
      absl::Span<const int32_t> appended, int64_t requested_segment,
      bool charge,
      const std::function<void(const v1::IngestResponse&)>& progress);

  const WorkflowContext& context_;
  const std::string tenant_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_APPEND_WORKFLOW_H_
