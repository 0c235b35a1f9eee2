// What every `twice` command shares: the server connection, output mode and
// the conversion of call results into exit codes and output.
#ifndef TWICE_SERVICES_CLI_CLI_CONTEXT_H_
#define TWICE_SERVICES_CLI_CLI_CONTEXT_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace twice::cli {

struct CliContext {
  std::string server;  // host:port
  bool json = false;   // one JSON object on stdout
  std::chrono::seconds timeout{600};
  // TLS: trust roots (empty = plaintext) and an optional client
  // certificate and key (PEM files).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // Bearer token sent as `authorization` metadata; empty = none.
  std::string token;
  std::vector<std::string> args;  // positional arguments after the command

  // ingest
  std::string model;           // empty = server default
  std::string document_id;     // empty = derived from content
  int64_t segment_tokens = 0;  // 0 = model's training context
  bool pin = false;
  // ask
  std::string mode = "default";
  int32_t max_tokens = 0;  // 0 = server default
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  // init-model
  std::string arch = "based";
  std::string preset = "tiny";
  std::string out;
  std::string tokenizer;  // empty = the built-in GPT-2 tokenizer
  // init-model: stored dtype; bench engine: comma-separated load dtypes.
  std::string weights_dtype = "auto";

  // A channel to `server` (TLS with tls_ca). An unreadable PEM file is
  // reported like a failed call and the command exits with code 1.
  std::shared_ptr<grpc::Channel> Connect() const;
  // A client context with the command's deadline and bearer token.
  std::unique_ptr<grpc::ClientContext> NewCall() const;
};

// Prints `status` (as {"error": {...}} with --json) and returns exit code 1;
// returns 0 for OK without printing.
int ReportError(const CliContext& cli, const absl::Status& status);
// Prints one JSON object on stdout.
void PrintJson(const nlohmann::json& value);

}  // namespace twice::cli

#endif  // TWICE_SERVICES_CLI_CLI_CONTEXT_H_
