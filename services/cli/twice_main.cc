// twice: command-line client of a Twice server.
//
//   twice ingest FILE            read a document into stored states
//   twice ask DOC "question"     ask a question (--mode=default|read_twice|...)
//   twice append DOC FILE        append text to a document (new tokens only)
//   twice docs                   list documents
//   twice rm DOC                 delete a document
//   twice models                 list served models
//   twice health                 gRPC health of the server
//   twice init-model --out DIR   write a random-weight model (no server)
//   twice store stats|verify|compact|gc   administer the server's store
//   twice store backup NAME | restore DIR --data-dir=NEW   checkpoints
//   twice bench engine           prefill / decode speed vs measured
//                                ceilings (no server)
//   twice bench store            store put/get vs a plain file (no server)
//   twice bench pipeline         ask modes' TTFT and prefill, cold vs cached,
//                                against a running server
//   twice bench load             concurrent mixed load with loss and answer
//                                checks, against a running server
//   twice eval SET.jsonl         answer accuracy by model x mode x facts x
//                                length, through the public API
//
// Every command takes --server=HOST:PORT and --json (one JSON object on
// stdout). Exit code 0 on success, 1 on any error.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "services/cli/commands.h"
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
ABSL_FLAG(std::string, model, "", "ingest: model name (empty = default)");
ABSL_FLAG(std::string, doc_id, "", "ingest: document id (empty = derived)");
ABSL_FLAG(int64_t, segment_tokens, 0,
          "ingest: tokens per stored segment (0 = model's training context)");
ABSL_FLAG(bool, pin, false, "ingest: pin the document");
ABSL_FLAG(std::string, mode, "default",
          "ask: default | read_twice | read_twice_full | prefix | "
          "prefix_with_question");
ABSL_FLAG(int32_t, max_tokens, 0, "ask: tokens to generate (0 = default)");
ABSL_FLAG(float, temperature, 0, "ask: sampling temperature (0 = greedy)");
ABSL_FLAG(int32_t, top_k, 0, "ask: top-k (0 = off)");
ABSL_FLAG(float, top_p, 0, "ask: top-p (0 or 1 = off)");
ABSL_FLAG(uint64_t, seed, 0, "ask: sampling seed");
ABSL_FLAG(std::vector<std::string>, stop, {}, "ask: stop strings");
ABSL_FLAG(
    std::string, arch, "based",
    "init-model, bench engine: architecture (based, jrt, mamba2, llama, rat)");
ABSL_FLAG(std::string, preset, "tiny",
          "init-model, bench engine: tiny | 360m-shape");
ABSL_FLAG(std::string, out, "", "init-model: output directory");
ABSL_FLAG(std::string, weights_dtype, "auto",
          "init-model: dtype the weights are stored in (auto = f32, bf16, "
          "f16); bench engine: comma-separated dtypes the weights are loaded "
          "in, rows of each side by side (auto, f32, bf16, f16, int8)");
ABSL_FLAG(std::string, tokenizer, "",
          "init-model: tokenizer.json to ship (empty = built-in GPT-2)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "twice COMMAND [args] [--server=HOST:PORT] [--json]\n"
      "commands: ingest FILE | ask DOC \"question\" [--mode=M] | "
      "append DOC FILE | docs | "
      "rm DOC | models | health | init-model --out DIR | "
      "store stats|verify|compact|gc|backup NAME|restore DIR | "
      "bench engine|store|pipeline|load | "
      "eval SET.jsonl");
  std::vector<std::string> args =
      twice::services::NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& arg : args) arg_ptrs.push_back(arg.data());
  std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  twice::cli::CliContext cli;
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
  cli.args.assign(positional.begin() + 2, positional.end());
  cli.model = absl::GetFlag(FLAGS_model);
  cli.document_id = absl::GetFlag(FLAGS_doc_id);
  cli.segment_tokens = absl::GetFlag(FLAGS_segment_tokens);
  cli.pin = absl::GetFlag(FLAGS_pin);
  cli.mode = absl::GetFlag(FLAGS_mode);
  cli.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  cli.temperature = absl::GetFlag(FLAGS_temperature);
  cli.top_k = absl::GetFlag(FLAGS_top_k);
  cli.top_p = absl::GetFlag(FLAGS_top_p);
  cli.seed = absl::GetFlag(FLAGS_seed);
  cli.stop = absl::GetFlag(FLAGS_stop);
  cli.arch = absl::GetFlag(FLAGS_arch);
  cli.preset = absl::GetFlag(FLAGS_preset);
  cli.out = absl::GetFlag(FLAGS_out);
  cli.weights_dtype = absl::GetFlag(FLAGS_weights_dtype);
  cli.tokenizer = absl::GetFlag(FLAGS_tokenizer);

  const std::string command = positional[1];
  if (command == "ingest") return twice::cli::RunIngest(cli);
  if (command == "ask") return twice::cli::RunAsk(cli);
  if (command == "append") return twice::cli::RunAppend(cli);
  if (command == "docs") return twice::cli::RunDocs(cli);
  if (command == "rm") return twice::cli::RunRemove(cli);
  if (command == "models") return twice::cli::RunModels(cli);
  if (command == "health") return twice::cli::RunHealth(cli);
  if (command == "init-model") return twice::cli::RunInitModel(cli);
  if (command == "store") return twice::cli::RunStore(cli);
  if (command == "bench") return twice::cli::RunBench(cli);
  if (command == "eval") return twice::cli::RunEval(cli);
  std::fprintf(stderr, "twice: unknown command '%s'\n%s\n", command.c_str(),
               absl::ProgramUsageMessage().data());
  return 2;
}
