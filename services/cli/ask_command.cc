#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "services/cli/commands.h"
#include "services/common/grpc_status.h"
#include "twice/v1/orchestrator.grpc.pb.h"

ABSL_FLAG(int64_t, as_of_tokens, 0,
          "ask: answer over the document's first N tokens (0 = all of it)");

namespace twice::cli {
namespace {

absl::Status ParseMode(const std::string& text, v1::AskMode* mode) {
  const std::string upper =
      absl::StrCat("ASK_MODE_", absl::AsciiStrToUpper(text));
  if (!v1::AskMode_Parse(upper, mode) || *mode == v1::ASK_MODE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown mode '", text,
        "'; expected default, read_twice, read_twice_full, prefix or "
        "prefix_with_question"));
  }
  return absl::OkStatus();
}

}  // namespace

int RunAsk(const CliContext& cli) {
  if (cli.args.size() != 2) {
    return ReportError(cli,
                       absl::InvalidArgumentError(
                           "usage: twice ask DOC \"question\" [--mode=M]"));
  }
  v1::AskRequest request;
  request.set_document_id(cli.args[0]);
  request.set_question(cli.args[1]);
  v1::AskMode mode;
  if (absl::Status parsed = ParseMode(cli.mode, &mode); !parsed.ok()) {
    return ReportError(cli, parsed);
  }
  request.set_mode(mode);
  request.set_as_of_tokens(absl::GetFlag(FLAGS_as_of_tokens));
  v1::SamplingOptions* sampling = request.mutable_sampling();
  sampling->set_max_tokens(cli.max_tokens);
  sampling->set_temperature(cli.temperature);
  sampling->set_top_k(cli.top_k);
  sampling->set_top_p(cli.top_p);
  sampling->set_seed(cli.seed);
  for (const std::string& stop : cli.stop) sampling->add_stop(stop);

  auto stub = v1::Orchestrator::NewStub(cli.Connect());
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  auto reader = stub->Ask(call.get(), request);
  std::string answer;
  std::vector<int32_t> tokens;
  v1::AskResponse response;
  v1::AskResponse final;
  while (reader->Read(&response)) {
    answer += response.text();
    tokens.insert(tokens.end(), response.tokens().begin(),
                  response.tokens().end());
    if (!cli.json) {
      std::fwrite(response.text().data(), 1, response.text().size(), stdout);
      std::fflush(stdout);
    }
    if (response.finished()) final = response;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    if (!cli.json && !answer.empty()) std::printf("\n");
    return ReportError(cli, services::FromGrpcStatus(status));
  }
  const v1::Usage& usage = final.usage();
  if (cli.json) {
    PrintJson({{"doc_id", cli.args[0]},
               {"mode", cli.mode},
               {"answer", answer},
               {"tokens", tokens},
               {"finish_reason", final.finish_reason()},
               {"usage",
                {{"tokens_prefilled", usage.tokens_prefilled()},
                 {"tokens_decoded", usage.tokens_decoded()},
                 {"states_reused", usage.states_reused()},
                 {"states_recomputed", usage.states_recomputed()},
                 {"tokens_reused", usage.tokens_reused()},
                 {"ttft_ms", usage.ttft_ms()},
                 {"total_ms", usage.total_ms()}}}});
  } else {
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(
        stderr,
        "[%s] prefilled=%lld decoded=%lld reused_states=%lld "
        "reused_tokens=%lld recomputed=%lld ttft=%.1fms total=%.1fms\n",
        final.finish_reason().c_str(),
        static_cast<long long>(usage.tokens_prefilled()),
        static_cast<long long>(usage.tokens_decoded()),
        static_cast<long long>(usage.states_reused()),
        static_cast<long long>(usage.tokens_reused()),
        static_cast<long long>(usage.states_recomputed()), usage.ttft_ms(),
        usage.total_ms());
  }
  return 0;
}

}  // namespace twice::cli
