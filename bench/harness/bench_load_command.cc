// twice-bench load: many concurrent clients mixing ingest, append, ask in
// every mode, batch ask and delete against a RUNNING deployment for a
// bounded time; prints throughput, latency and TTFT percentiles per
// operation, errors by status, server memory, and the checks of
// bench/harness/load_bench.h (documents lost, answers changed, unclean
// failures). Exits 1 when a check fails.
//
//   twice-bench load --server=HOST:PORT [--load_clients=16]
//       [--load_seconds=30] [--load_docs_per_client=2]
//       [--load_doc_tokens=256] [--load_append_tokens=64]
//       [--load_max_appends=3] [--load_questions=3]
//       [--load_mix=ingest:1,append:1,ask:6,batch_ask:2]
//       [--load_answer_tokens=4] [--metrics=HOST:PORT,...]
//       [--answers_out=FILE] [--answers_in=FILE] [--load_id_prefix=load]
//       [--load_verify_seconds=120] [--keep_docs] [--model=NAME]
//       [--segment_tokens=N] [--json]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/harness/bench_commands.h"
#include "bench/harness/bench_common.h"
#include "bench/harness/load_bench.h"

ABSL_FLAG(int32_t, load_clients, 16, "bench load: concurrent clients");
ABSL_FLAG(double, load_seconds, 30, "bench load: seconds of load");
ABSL_FLAG(int32_t, load_docs_per_client, 2,
          "bench load: document slots per client");
ABSL_FLAG(int64_t, load_doc_tokens, 256, "bench load: tokens per document");
ABSL_FLAG(int64_t, load_append_tokens, 64, "bench load: tokens per append");
ABSL_FLAG(int32_t, load_max_appends, 3, "bench load: appends per document");
ABSL_FLAG(int32_t, load_questions, 3,
          "bench load: distinct questions per document (and per batch ask)");
ABSL_FLAG(std::vector<std::string>, load_mix,
          (std::vector<std::string>{"ingest:1", "append:1", "ask:6",
                                    "batch_ask:2"}),
          "bench load: operation weights, OP:WEIGHT comma-separated (ops: "
          "ingest, append, ask, batch_ask)");
ABSL_FLAG(int32_t, load_answer_tokens, 4,
          "bench load: tokens each greedy answer generates");
ABSL_FLAG(std::vector<std::string>, metrics, {},
          "bench load: metrics endpoints (HOST:PORT) whose resident memory "
          "is reported");
ABSL_FLAG(std::string, answers_out, "",
          "bench load: write this run's greedy answers here");
ABSL_FLAG(std::string, answers_in, "",
          "bench load: compare answers with a baseline run's --answers_out");
ABSL_FLAG(std::string, load_id_prefix, "load",
          "bench load: document ids are PREFIX-s<slot>");
ABSL_FLAG(double, load_verify_seconds, 120,
          "bench load: how long the final check waits for the deployment");
ABSL_DECLARE_FLAG(bool, keep_docs);

namespace twice::bench {
namespace {

absl::Status ParseMix(const std::vector<std::string>& items,
                      std::map<std::string, double>* mix) {
  mix->clear();
  for (const std::string& item : items) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    double weight = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &weight) ||
        weight < 0 ||
        (parts[0] != "ingest" && parts[0] != "append" && parts[0] != "ask" &&
         parts[0] != "batch_ask")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bench load: --load_mix item '", item,
          "' is not OP:WEIGHT with OP ingest, append, ask or batch_ask"));
    }
    (*mix)[parts[0]] = weight;
  }
  return absl::OkStatus();
}

double MiB(double bytes) { return bytes < 0 ? -1 : bytes / (1024.0 * 1024.0); }

void PrintTable(const LoadBenchResult& r, const LoadBenchOptions& o,
                const std::string& server) {
  std::printf("load against %s: model %s, %d clients, %.1f s\n", server.c_str(),
              r.model.c_str(), o.clients, r.seconds);
  std::printf("%-22s %8s %8s %9s %9s %9s %9s %10s %10s\n", "operation", "calls",
              "ok", "calls/s", "p50_ms", "p90_ms", "p99_ms", "ttft_p50",
              "ttft_p99");
  for (const auto& [op, s] : r.ops) {
    std::printf("%-22s %8lld %8lld %9.2f %9.1f %9.1f %9.1f %10.1f %10.1f\n",
                op.c_str(), static_cast<long long>(s.calls),
                static_cast<long long>(s.ok),
                static_cast<double>(s.calls) / std::max(r.seconds, 1e-9),
                Percentile(s.latency_ms, 0.5), Percentile(s.latency_ms, 0.9),
                Percentile(s.latency_ms, 0.99), Percentile(s.ttft_ms, 0.5),
                Percentile(s.ttft_ms, 0.99));
  }
  std::printf("errors by status:");
  if (r.errors.empty()) std::printf(" none");
  for (const auto& [code, n] : r.errors) {
    std::printf(" %s %lld", code.c_str(), static_cast<long long>(n));
  }
  std::printf("\nunclean failures: %lld\n",
              static_cast<long long>(r.unclean_errors));
  for (const std::string& e : r.unclean_examples) {
    std::printf("  %s\n", e.c_str());
  }
  std::printf("states recomputed by answers (missing or corrupt): %lld\n",
              static_cast<long long>(r.states_recomputed));
  std::printf("documents: %lld checked at the end, %lld lost\n",
              static_cast<long long>(r.documents_verified),
              static_cast<long long>(r.documents_lost));
  for (const std::string& e : r.lost_examples) std::printf("  %s\n", e.c_str());
  std::printf(
      "answers: %lld (%lld distinct questions), %lld changed within the run, "
      "%lld compared with the baseline, %lld differ from it\n",
      static_cast<long long>(r.answers), static_cast<long long>(r.answer_keys),
      static_cast<long long>(r.answers_differ_in_run),
      static_cast<long long>(r.answers_compared_to_baseline),
      static_cast<long long>(r.answers_differ_from_baseline));
  for (const std::string& e : r.differ_examples) {
    std::printf("  %s\n", e.c_str());
  }
  for (const LoadMemory& m : r.memory) {
    std::printf(
        "server memory %s: start %.1f MiB, peak %.1f MiB, end %.1f "
        "MiB (-1: not read)\n",
        m.endpoint.c_str(), MiB(m.start_bytes), MiB(m.peak_bytes),
        MiB(m.end_bytes));
  }
}

nlohmann::json ToJson(const LoadBenchResult& r) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [op, s] : r.ops) {
    ops[op] = {{"calls", s.calls},
               {"ok", s.ok},
               {"calls_per_second",
                static_cast<double>(s.calls) / std::max(r.seconds, 1e-9)},
               {"latency_ms_p50", Percentile(s.latency_ms, 0.5)},
               {"latency_ms_p90", Percentile(s.latency_ms, 0.9)},
               {"latency_ms_p99", Percentile(s.latency_ms, 0.99)},
               {"ttft_ms_p50", Percentile(s.ttft_ms, 0.5)},
               {"ttft_ms_p99", Percentile(s.ttft_ms, 0.99)}};
  }
  nlohmann::json memory = nlohmann::json::array();
  for (const LoadMemory& m : r.memory) {
    memory.push_back({{"endpoint", m.endpoint},
                      {"start_bytes", m.start_bytes},
                      {"peak_bytes", m.peak_bytes},
                      {"end_bytes", m.end_bytes}});
  }
  return {{"model", r.model},
          {"seconds", r.seconds},
          {"ops", ops},
          {"errors", r.errors},
          {"unclean_errors", r.unclean_errors},
          {"unclean_examples", r.unclean_examples},
          {"documents_verified", r.documents_verified},
          {"documents_lost", r.documents_lost},
          {"lost_examples", r.lost_examples},
          {"states_recomputed", r.states_recomputed},
          {"answers", r.answers},
          {"answer_keys", r.answer_keys},
          {"answers_differ_in_run", r.answers_differ_in_run},
          {"answers_compared_to_baseline", r.answers_compared_to_baseline},
          {"answers_differ_from_baseline", r.answers_differ_from_baseline},
          {"differ_examples", r.differ_examples},
          {"memory", memory}};
}

}  // namespace

int RunBenchLoad(const CliContext& cli) {
  LoadBenchOptions options;
  options.model = cli.model;
  options.segment_tokens = cli.segment_tokens;
  options.clients = absl::GetFlag(FLAGS_load_clients);
  options.seconds = absl::GetFlag(FLAGS_load_seconds);
  options.docs_per_client = absl::GetFlag(FLAGS_load_docs_per_client);
  options.shape.doc_tokens = absl::GetFlag(FLAGS_load_doc_tokens);
  options.shape.append_tokens = absl::GetFlag(FLAGS_load_append_tokens);
  options.shape.max_appends = absl::GetFlag(FLAGS_load_max_appends);
  options.shape.questions_per_doc = absl::GetFlag(FLAGS_load_questions);
  options.answer_tokens = absl::GetFlag(FLAGS_load_answer_tokens);
  options.metrics = absl::GetFlag(FLAGS_metrics);
  options.answers_in = absl::GetFlag(FLAGS_answers_in);
  options.answers_out = absl::GetFlag(FLAGS_answers_out);
  options.id_prefix = absl::GetFlag(FLAGS_load_id_prefix);
  options.verify_seconds = absl::GetFlag(FLAGS_load_verify_seconds);
  options.keep_docs = absl::GetFlag(FLAGS_keep_docs);
  if (absl::Status s = ParseMix(absl::GetFlag(FLAGS_load_mix), &options.mix);
      !s.ok()) {
    return ReportError(cli, s);
  }
  if (!cli.json) {
    std::printf("bench load: %d clients for %.0f s against %s ...\n",
                options.clients, options.seconds, cli.server.c_str());
    std::fflush(stdout);
  }
  absl::StatusOr<LoadBenchResult> result = RunLoadBench(cli, options);
  if (!result.ok()) return ReportError(cli, result.status());
  if (cli.json) {
    PrintJson(ToJson(*result));
  } else {
    PrintTable(*result, options, cli.server);
  }
  const absl::Status verdict = result->Verdict();
  if (!verdict.ok()) {
    std::fprintf(stderr, "twice: %s\n", std::string(verdict.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace twice::bench
