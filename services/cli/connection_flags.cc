#include "services/cli/connection_flags.h"

#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "services/common/flag_names.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Twice server HOST:PORT");
ABSL_FLAG(bool, json, false, "Print one JSON object on stdout");
ABSL_FLAG(int, timeout_seconds, 600, "Deadline of each call");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM trust roots: connect over TLS and verify the server against "
          "them (empty = plaintext)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for servers that require one (mTLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, token, "",
          "Bearer token sent with every call (default: $TWICE_TOKEN)");

namespace twice::cli {

std::vector<std::string> ParseClientCommandLine(int argc, char** argv) {
  std::vector<std::string> args = services::NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& arg : args) arg_ptrs.push_back(arg.data());
  const std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  return std::vector<std::string>(positional.begin(), positional.end());
}

void SetConnectionFromFlags(CliContext& cli) {
  cli.server = absl::GetFlag(FLAGS_server);
  cli.json = absl::GetFlag(FLAGS_json);
  cli.timeout = std::chrono::seconds(absl::GetFlag(FLAGS_timeout_seconds));
  cli.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  cli.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  cli.tls_key = absl::GetFlag(FLAGS_tls_key);
  cli.token = absl::GetFlag(FLAGS_token);
  if (cli.token.empty() && std::getenv("TWICE_TOKEN") != nullptr) {
    cli.token = std::getenv("TWICE_TOKEN");
  }
}

}  // namespace twice::cli
