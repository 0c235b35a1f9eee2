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
//   twice eval SET.jsonl         answer accuracy by model x mode x facts x
//                                length, through the public API
//
// Every command takes --server=HOST:PORT and --json (one JSON object on
// stdout). Exit code 0 on success, 1 on any error. The benchmarks are a
// separate program, twice-bench (bench/harness/twice_bench_main.cc).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "services/cli/commands.h"
#include "services/cli/connection_flags.h"

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
    "init-model: architecture (based, jrt, mamba2, llama, rat, nemotron_h, "
    "granitemoehybrid)");
ABSL_FLAG(std::string, preset, "tiny",
          "init-model: tiny, or a shape of the architecture (360m-shape, "
          "mamba2-130m-shape, nemotron-h-8b-width, ...)");
ABSL_FLAG(std::string, out, "", "init-model: output directory");
ABSL_FLAG(std::string, weights_dtype, "auto",
          "init-model: dtype the weights are stored in (auto = f32, bf16, "
          "f16)");
ABSL_FLAG(std::string, tokenizer, "",
          "init-model: tokenizer.json to ship (empty = built-in GPT-2)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "twice COMMAND [args] [--server=HOST:PORT] [--json]\n"
      "commands: ingest FILE | ask DOC \"question\" [--mode=M] | "
      "append DOC FILE | docs | "
      "rm DOC | models | health | init-model --out DIR | "
      "store stats|verify|compact|gc|backup NAME|restore DIR | "
      "eval SET.jsonl\n"
      "benchmarks: twice-bench engine|store|pipeline|load");
  const std::vector<std::string> positional =
      twice::cli::ParseClientCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  twice::cli::CliContext cli;
  twice::cli::SetConnectionFromFlags(cli);
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
  if (command == "eval") return twice::cli::RunEval(cli);
  std::fprintf(stderr, "twice: unknown command '%s'\n%s\n", command.c_str(),
               absl::ProgramUsageMessage().data());
  return 2;
}
