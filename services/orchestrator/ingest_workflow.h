// IngestWorkflow: one Ingest call. Collects the streamed document within
// the limits, tokenizes it, prefills it segment by segment through the
// prefill service (reusing every segment already stored, so a repeated or
// interrupted ingest resumes where the stored states end) and, for a model
// with a prefix encoder, its prefix-encoded state; then commits the record
// conditionally on the one read, after the states it names are durable.
#ifndef TWICE_SERVICES_ORCHESTRATOR_INGEST_WORKFLOW_H_
#define TWICE_SERVICES_ORCHESTRATOR_INGEST_WORKFLOW_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <string>
#include <utility>

#include "services/orchestrator/workflow_context.h"
#include "twice/v1/orchestrator.pb.h"

namespace twice::services {

class IngestWorkflow {
 public:
  // For a call of `tenant` (authenticated and admitted by the caller).
  IngestWorkflow(const WorkflowContext& context, std::string tenant)
      : context_(context), tenant_(std::move(tenant)) {}

  // Streams progress after every stored segment and ends with the
  // document's DocumentInfo.
  grpc::Status Run(
      grpc::ServerContext& server,
      grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>& stream);

 private:
  const WorkflowContext& context_;
  const std::string tenant_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_INGEST_WORKFLOW_H_
