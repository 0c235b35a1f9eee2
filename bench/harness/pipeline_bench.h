// The runner behind `twice-bench pipeline`: time to first token and prefill
// work per question of each ask mode against a running deployment, for
// documents that are cold (never seen) or cached (ingested before), beside
// a baseline that reads the whole document again for every question.
//
// Documents are random token ids of exactly the requested length (no
// tokenizer effects), fresh per run, so "cold" is never served from an
// earlier run's states. Per (document length, mode, cache) row:
//   cached: the document is ingested once (not timed); each question is one
//     Ask, timed from the request to its first streamed token.
//   cold:   each question gets its own never-seen document of the same
//     length: Ingest then Ask, timed from the start of the ingest to the
//     first token; the prefill of the ingest counts as the question's.
//   baseline: what a server without stored states does — each question
//     reads its document and the question from the empty state (a fresh
//     document ingested as one segment, then asked). It keeps nothing, so
//     its cold and cached rows are one measurement.
// Documents made by the run are deleted afterwards.
#ifndef TWICE_BENCH_HARNESS_PIPELINE_BENCH_H_
#define TWICE_BENCH_HARNESS_PIPELINE_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/harness/bench_context.h"

namespace twice::bench {

struct PipelineBenchOptions {
  // Document lengths in tokens. Default: 2048, 8192, 32768.
  std::vector<int64_t> doc_tokens = {2048, 8192, 32768};
  // Questions per (length, mode, cache). Default: 16.
  int questions = 16;
  // Ask modes by name, plus "baseline". Default: default, read_twice,
  // read_twice_full, baseline.
  std::vector<std::string> modes = {"default", "read_twice", "read_twice_full",
                                    "baseline"};
  // Model to use; empty = the server's default.
  std::string model;
  // Tokens each answer generates (TTFT needs one). Default: 1.
  int answer_tokens = 1;
  // Ingest segment size for non-baseline documents; 0 = the model's
  // training context. Default: 0.
  int64_t segment_tokens = 0;
};

struct PipelineBenchRow {
  int64_t doc_tokens = 0;
  std::string mode;
  std::string cache;  // "cold" | "cached"
  int questions = 0;
  double ttft_ms_p50 = 0;
  double ttft_ms_p90 = 0;
  // From the same start to the answer's last message.
  double total_ms_p50 = 0;
  // Tokens run through prefill per question (ingest included when cold).
  double tokens_prefilled_per_question = 0;
  // Document tokens per question served from states stored before the
  // question (0 when cold).
  double tokens_reused_per_question = 0;
};

// Runs the rows in order (per length: per mode: cold, then cached), calling
// `on_row` as each completes. Errors are the server's, naming the step.
[[nodiscard]] absl::StatusOr<std::vector<PipelineBenchRow>> RunPipelineBench(
    const CliContext& cli, const PipelineBenchOptions& options,
    const std::function<void(const PipelineBenchRow&)>& on_row);

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_PIPELINE_BENCH_H_
