// The runner behind `twice-bench load`: many concurrent clients (gRPC
// callback API, one channel) mix ingest, append, ask in every mode the model
// supports, batch ask and delete against a running deployment for a bounded
// time, then check what a serving system owes its users:
//
//   * no acknowledged document is lost: every ingest or append that
//     returned OK is still there, with exactly the tokens it acknowledged
//     (checked whenever a client touches the document again, and for every
//     document once the load stops);
//   * no greedy answer changes: every document's content is a pure
//     function of (slot, appends), so the same question in the same mode
//     must get the same tokens every time, in this run and in a baseline run
//     (load_workload.h);
//   * every failed call ends with a clean status: a code that says what
//     happened and a message (UNKNOWN or an empty message is not clean).
//
// Each client owns its document slots, so its operations on one document
// are ordered. A call that fails leaves its document in doubt (an append
// may or may not have been applied when the connection broke); the client
// asks GetDocument before it touches the document again.
//
// Throughput, latency and TTFT percentiles are per operation; error counts
// per status code; server memory comes from process_resident_memory_bytes
// at each metrics endpoint given, before, during (peak) and after the load.
#ifndef TWICE_BENCH_HARNESS_LOAD_BENCH_H_
#define TWICE_BENCH_HARNESS_LOAD_BENCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/harness/bench_context.h"
#include "bench/harness/load_workload.h"

namespace twice::bench {

struct LoadBenchOptions {
  // Concurrent clients. Default: 16.
  int clients = 16;
  // Seconds of load. Default: 30.
  double seconds = 30;
  // Document slots per client. Default: 2.
  int docs_per_client = 2;
  // Document, append and question sizes (vocab_size is filled from the
  // model).
  LoadWorkloadShape shape;
  // Relative weights of the operations. Defaults: ingest 1, append 1,
  // ask 6, batch_ask 2 (an ingest of a slot that exists deletes it first).
  std::map<std::string, double> mix = {
      {"ingest", 1}, {"append", 1}, {"ask", 6}, {"batch_ask", 2}};
  // Tokens each answer generates (greedy). Default: 4.
  int answer_tokens = 4;
  // Tokens per ingest segment; 0 = the model's training context.
  // Default: 0.
  int64_t segment_tokens = 0;
  // Model to use; empty = the server's default.
  std::string model;
  // Metrics endpoints (host:port) whose process_resident_memory_bytes is
  // reported. Default: none.
  std::vector<std::string> metrics;
  // Seconds the final check may wait for the deployment to answer (it may
  // be restarting after a fault). Default: 120.
  double verify_seconds = 120;
  // Seconds to wait after the load before the last memory reading, so
  // caches and queues can drain. Default: 3.
  double settle_seconds = 3;
  // Answers of a baseline run to compare with (written by answers_out of
  // a run with the same model and workload). Empty = none.
  std::string answers_in;
  // Where to write this run's answers. Empty = nowhere.
  std::string answers_out;
  // Document ids are "<id_prefix>-s<slot>". Default: "load".
  std::string id_prefix = "load";
  // Keep the documents after the run (default: deleted).
  bool keep_docs = false;
};

struct LoadOpStats {
  int64_t calls = 0;
  int64_t ok = 0;
  std::vector<double> latency_ms;  // every finished call, OK or not
  std::vector<double> ttft_ms;     // asks that streamed a token
};

struct LoadMemory {
  std::string endpoint;
  double start_bytes = -1;  // -1: not read
  double peak_bytes = -1;
  double end_bytes = -1;
};

struct LoadBenchResult {
  std::string model;
  double seconds = 0;                      // load phase, measured
  std::map<std::string, LoadOpStats> ops;  // "ingest", "ask:read_twice", ...
  std::map<std::string, int64_t> errors;   // status code name -> calls
  int64_t unclean_errors = 0;
  std::vector<std::string> unclean_examples;  // a few, for the report
  int64_t documents_acknowledged = 0;         // slots ever acknowledged
  int64_t documents_verified = 0;             // checked at the end
  int64_t documents_lost = 0;
  std::vector<std::string> lost_examples;
  // Stored states that answers found missing or corrupt and recomputed from
  // the document's tokens (Usage.states_recomputed, summed).
  int64_t states_recomputed = 0;
  int64_t answers = 0;
  int64_t answer_keys = 0;
  int64_t answers_differ_in_run = 0;
  int64_t answers_compared_to_baseline = 0;
  int64_t answers_differ_from_baseline = 0;
  std::vector<std::string> differ_examples;
  std::vector<LoadMemory> memory;

  // The requirements of load_bench.h's header, as one status: OK, or
  // FAILED_PRECONDITION naming each one broken.
  absl::Status Verdict() const;
};

// Runs the load, then the final check. Errors are only those that stop
// the run itself (no model, unreadable baseline, the server unreachable
// at the start); everything that happens under load is in the result.
[[nodiscard]] absl::StatusOr<LoadBenchResult> RunLoadBench(
    const CliContext& cli, const LoadBenchOptions& options);

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_LOAD_BENCH_H_
