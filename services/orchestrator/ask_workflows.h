// AskWorkflow and BatchAskWorkflow: one Ask or BatchAsk call. Each finds
// the caller's document and its model (reading the document into a new
// model version first when it changed), validates every question before
// answering any, resolves once what the questions share, and answers
// (QuestionAnswerer) — a batch's questions concurrently, their pieces
// interleaved on the stream and tagged with their index.
#ifndef TWICE_SERVICES_ORCHESTRATOR_ASK_WORKFLOWS_H_
#define TWICE_SERVICES_ORCHESTRATOR_ASK_WORKFLOWS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <string>
#include <utility>

#include "services/orchestrator/workflow_context.h"
#include "twice/v1/orchestrator.pb.h"

namespace twice::services {

class AskWorkflow {
 public:
  // For a call of `tenant` (authenticated and admitted by the caller).
  AskWorkflow(const WorkflowContext& context, std::string tenant)
      : context_(context), tenant_(std::move(tenant)) {}

  grpc::Status Run(grpc::ServerContext& server, const v1::AskRequest& request,
                   grpc::ServerWriter<v1::AskResponse>& writer);

 private:
  const WorkflowContext& context_;
  const std::string tenant_;
};

class BatchAskWorkflow {
 public:
  // For a call of `tenant` (authenticated and admitted by the caller).
  BatchAskWorkflow(const WorkflowContext& context, std::string tenant)
      : context_(context), tenant_(std::move(tenant)) {}

  grpc::Status Run(grpc::ServerContext& server,
                   const v1::BatchAskRequest& request,
                   grpc::ServerWriter<v1::BatchAskResponse>& writer);

 private:
  const WorkflowContext& context_;
  const std::string tenant_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_ASK_WORKFLOWS_H_
