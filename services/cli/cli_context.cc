#include "services/cli/cli_context.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/status/status.h"
#include "services/common/tls.h"

namespace twice::cli {

std::shared_ptr<grpc::Channel> CliContext::Connect() const {
  services::TlsOptions tls;
  tls.ca_file = tls_ca;
  tls.cert_file = tls_cert;
  tls.key_file = tls_key;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      services::MakeChannelCredentials(tls);
  if (!credentials.ok()) std::exit(ReportError(*this, credentials.status()));
  return grpc::CreateChannel(server, *credentials);
}

std::unique_ptr<grpc::ClientContext> CliContext::NewCall() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

int ReportError(const CliContext& cli, const absl::Status& status) {
  if (status.ok()) return 0;
  if (cli.json) {
    PrintJson({{"error",
                {{"code", absl::StatusCodeToString(status.code())},
                 {"message", std::string(status.message())}}}});
  } else {
    std::fprintf(stderr, "twice: %s: %s\n",
                 absl::StatusCodeToString(status.code()).c_str(),
                 std::string(status.message()).c_str());
  }
  return 1;
}

void PrintJson(const nlohmann::json& value) {
  // Invalid UTF-8 (a model may emit it) is replaced, never a crash.
  std::cout << value.dump(-1, ' ', false,
                          nlohmann::json::error_handler_t::replace)
            << std::endl;
}

}  // namespace twice::cli
