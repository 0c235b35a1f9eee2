// twice-bench pipeline: time to first token and prefill work per question of
// each ask mode against a RUNNING deployment, cold and cached, beside a
// baseline that re-reads the document for every question
// (bench/harness/pipeline_bench.h says exactly what each row measures).
//
//   twice-bench pipeline --server=HOST:PORT [--doc_tokens=2048,8192,32768]
//       [--questions=16] [--bench_modes=default,read_twice,read_twice_full,
//       baseline] [--answer_tokens=1] [--model=NAME] [--segment_tokens=N]
//       [--json]
//
// --json prints one object per (document length, mode, cold|cached).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/bench_commands.h"
#include "bench/harness/pipeline_bench.h"

ABSL_FLAG(std::vector<std::string>, doc_tokens,
          (std::vector<std::string>{"2048", "8192", "32768"}),
          "bench pipeline: document lengths in tokens, comma-separated");
ABSL_FLAG(int32_t, questions, 16,
          "bench pipeline: questions per length, mode and cache state");
ABSL_FLAG(std::vector<std::string>, bench_modes,
          (std::vector<std::string>{"default", "read_twice", "read_twice_full",
                                    "baseline"}),
          "bench pipeline: ask modes to measure, plus baseline");
ABSL_FLAG(int32_t, answer_tokens, 1,
          "bench pipeline: tokens each answer generates");

namespace twice::bench {

int RunBenchPipeline(const CliContext& cli) {
  if (cli.args.size() != 1 || cli.args[0] != "pipeline") {
    return ReportError(cli,
                       absl::InvalidArgumentError(
                           "usage: twice-bench pipeline --server=HOST:PORT "
                           "[--doc_tokens=2048,8192,32768] [--questions=16] "
                           "[--bench_modes=...] [--json]"));
  }
  PipelineBenchOptions options;
  options.model = cli.model;
  options.segment_tokens = cli.segment_tokens;
  options.questions = absl::GetFlag(FLAGS_questions);
  options.answer_tokens = absl::GetFlag(FLAGS_answer_tokens);
  options.modes = absl::GetFlag(FLAGS_bench_modes);
  options.doc_tokens.clear();
  for (const std::string& text : absl::GetFlag(FLAGS_doc_tokens)) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 1) {
      return ReportError(cli, absl::InvalidArgumentError(absl::StrCat(
                                  "bench: --doc_tokens: \"", text,
                                  "\" is not a positive integer")));
    }
    options.doc_tokens.push_back(n);
  }
  if (!cli.json) {
    std::printf(
        "pipeline bench against %s: %d questions per row, %d-token "
        "answers; TTFT from the request (cold: from the ingest) to "
        "the first token, total to the last\n",
        cli.server.c_str(), options.questions, options.answer_tokens);
    std::printf("%10s  %-16s %-7s %9s %12s %12s %13s %16s %14s\n", "doc_tokens",
                "mode", "cache", "questions", "ttft_ms_p50", "ttft_ms_p90",
                "total_ms_p50", "prefilled/quest", "reused/quest");
    std::fflush(stdout);
  }
  absl::StatusOr<std::vector<PipelineBenchRow>> rows =
      RunPipelineBench(cli, options, [&](const PipelineBenchRow& r) {
        if (cli.json) {
          PrintJson(
              {{"doc_tokens", r.doc_tokens},
               {"mode", r.mode},
               {"cache", r.cache},
               {"questions", r.questions},
               {"ttft_ms_p50", r.ttft_ms_p50},
               {"ttft_ms_p90", r.ttft_ms_p90},
               {"total_ms_p50", r.total_ms_p50},
               {"tokens_prefilled_per_question",
                r.tokens_prefilled_per_question},
               {"tokens_reused_per_question", r.tokens_reused_per_question}});
          return;
        }
        std::printf(
            "%10lld  %-16s %-7s %9d %12.2f %12.2f %13.2f %16.1f "
            "%14.1f\n",
            static_cast<long long>(r.doc_tokens), r.mode.c_str(),
            r.cache.c_str(), r.questions, r.ttft_ms_p50, r.ttft_ms_p90,
            r.total_ms_p50, r.tokens_prefilled_per_question,
            r.tokens_reused_per_question);
        std::fflush(stdout);
      });
  if (!rows.ok()) return ReportError(cli, rows.status());
  return 0;
}

}  // namespace twice::bench
