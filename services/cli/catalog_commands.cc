// docs, rm, models and health: the small catalog and status commands.
#include <cstdio>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "services/cli/commands.h"
#include "services/common/grpc_status.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::cli {
namespace {

int CallFailed(const CliContext& cli, const grpc::Status& status) {
  return ReportError(cli, services::FromGrpcStatus(status));
}

}  // namespace

int RunDocs(const CliContext& cli) {
  auto stub = v1::Orchestrator::NewStub(cli.Connect());
  nlohmann::json documents = nlohmann::json::array();
  std::string page_token;
  do {
    std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
    v1::ListDocumentsRequest request;
    request.set_page_token(page_token);
    v1::ListDocumentsResponse response;
    grpc::Status status = stub->ListDocuments(call.get(), request, &response);
    if (!status.ok()) return CallFailed(cli, status);
    for (const v1::DocumentInfo& doc : response.documents()) {
      documents.push_back({{"doc_id", doc.document_id()},
                           {"model", doc.model()},
                           {"tokens", doc.tokens()},
                           {"segments", doc.segments_size()},
                           {"pinned", doc.pinned()},
                           {"created_unix_ms", doc.created_unix_ms()}});
      if (!cli.json) {
        std::printf("%s\ttokens=%lld segments=%d%s\n",
                    doc.document_id().c_str(),
                    static_cast<long long>(doc.tokens()), doc.segments_size(),
                    doc.pinned() ? " pinned" : "");
      }
    }
    page_token = response.next_page_token();
  } while (!page_token.empty());
  if (cli.json) PrintJson({{"documents", documents}});
  return 0;
}

int RunRemove(const CliContext& cli) {
  if (cli.args.size() != 1) {
    return ReportError(cli, absl::InvalidArgumentError("usage: twice rm DOC"));
  }
  auto stub = v1::Orchestrator::NewStub(cli.Connect());
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::DeleteDocumentRequest request;
  request.set_document_id(cli.args[0]);
  v1::DeleteDocumentResponse response;
  grpc::Status status = stub->DeleteDocument(call.get(), request, &response);
  if (!status.ok()) return CallFailed(cli, status);
  if (cli.json) {
    PrintJson({{"doc_id", cli.args[0]},
               {"states_deleted", response.states_deleted()}});
  } else {
    std::printf("deleted %s (%lld states)\n", cli.args[0].c_str(),
                static_cast<long long>(response.states_deleted()));
  }
  return 0;
}

int RunModels(const CliContext& cli) {
  auto stub = v1::Orchestrator::NewStub(cli.Connect());
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::ListModelsResponse response;
  grpc::Status status =
      stub->ListModels(call.get(), v1::ListModelsRequest(), &response);
  if (!status.ok()) return CallFailed(cli, status);
  nlohmann::json models = nlohmann::json::array();
  for (const v1::ModelInfo& model : response.models()) {
    nlohmann::json modes = nlohmann::json::array();
    for (int mode : model.modes()) {
      modes.push_back(v1::AskMode_Name(static_cast<v1::AskMode>(mode)));
    }
    models.push_back({{"name", model.name()},
                      {"architecture", model.architecture()},
                      {"fingerprint", model.fingerprint()},
                      {"vocab_size", model.vocab_size()},
                      {"training_context", model.training_context()},
                      {"state_bytes", model.state_bytes()},
                      {"modes", modes}});
    if (!cli.json) {
      std::printf("%s%s\tarch=%s state_bytes=%lld fingerprint=%.16s\n",
                  model.name().c_str(),
                  model.name() == response.default_model() ? " (default)" : "",
                  model.architecture().c_str(),
                  static_cast<long long>(model.state_bytes()),
                  model.fingerprint().c_str());
    }
  }
  if (cli.json) {
    PrintJson(
        {{"models", models}, {"default_model", response.default_model()}});
  }
  return 0;
}

int RunHealth(const CliContext& cli) {
  auto stub = grpc::health::v1::Health::NewStub(cli.Connect());
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(call.get(), request, &response);
  if (!status.ok()) return CallFailed(cli, status);
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
          response.status());
  if (cli.json) {
    PrintJson({{"status", name}, {"server", cli.server}});
  } else {
    std::printf("%s %s\n", cli.server.c_str(), name.c_str());
  }
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING
             ? 0
             : 1;
}

}  // namespace twice::cli
