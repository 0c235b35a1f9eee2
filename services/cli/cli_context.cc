#include "services/cli/cli_context.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdio>
#include <iostream>

#include "absl/status/status.h"

namespace twice::cli {

std::shared_ptr<grpc::Channel> CliContext::Connect() const {
  return grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
}

std::unique_ptr<grpc::ClientContext> CliContext::NewCall() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
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
