// EngineBench: prefill and decode speed of a random-weight model on CPU,
// each next to a ceiling measured in the same run (`twice-bench engine`).
//
// Rows of kind "prefill", one per prompt length T:
//   prefill   best wall time of Prefill(T tokens) into a fresh state
//             (JRT: a prefix read); tokens/s = T / time; GFLOP/s = the
//             analytic FLOPs of EngineCost / time
//   sgemm     GFLOP/s of one 2048^3 GEMM through kernels::Linear (the
//             engine's own GEMM path: pool + single-threaded BLAS), the
//             better of a run just before and just after the prefill
//   cpu eff.  the same ratio in FLOPs per process CPU second: robust to
//             other processes taking time slices on a shared machine
//   decode    Step() tokens/s continuing the prefilled state (best step;
//             the median is in the JSON), at position `decode_position`;
//             in decode-only rows with a batch B > 1 (`decode_batches`),
//             StepBatch of B copies of the state, B tokens per step
//   bound     decode ceiling = measured memory bandwidth / (bytes of weights
//             one step reads + the state's bytes), times B for a batch (the
//             weights once, B states); the bandwidth is a
//             multi-threaded streaming read of a 512 MiB buffer, measured
//             right after the decode
//   state     SequenceState::ByteSize after the prefill
//   peak RSS  the prefill phase's high-water mark: VmHWM is reset (write
//             "5" to /proc/self/clear_refs) before the first prefill of the
//             row and read after the last; so model writing and earlier
//             rows do not count, and touched weight pages (mmapped f32
//             views) do. Where the reset is refused the row says so and the
//             value is the process's lifetime peak.
// Rows of kind "decode", one per decode position P: the decode and state
// columns only, from a state grown to P without reading (synthetic_state.h)
// — how a 32k-token KV cache costs a step, without a quadratic prefill.
// Rates are best-of-repetitions (repeat until `min_seconds`; prefill at
// most 10): on a shared machine compare the ratios within a row, not rows
// across runs.
#ifndef TWICE_BENCH_ENGINE_BENCH_RUNNER_H_
#define TWICE_BENCH_ENGINE_BENCH_RUNNER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "kernels/dtype.h"

namespace twice::bench {

struct EngineBenchOptions {
  // Architectures, comma-separated: based, jrt, mamba2, llama, rat,
  // nemotron_h, granitemoehybrid (rows of each in turn). Default "based".
  std::string arch = "based";
  // A WriteRandomModel preset every listed architecture has ("tiny"), or
  // "realistic": each one's realistic shape (360m-shape, mamba2-130m-shape,
  // llama-360m-shape, rat-xl-shape, nemotron-h-8b-width), or "width-2048":
  // rat-xl-shape and llama-2048-width, the RAT-vs-Transformer decode pair.
  // Default "tiny".
  std::string preset = "tiny";
  // Prompt lengths, one row each, each >= 1. Default 512, 2048, 8192.
  std::vector<int64_t> tokens = {512, 2048, 8192};
  // Decode-only rows at these positions, each >= 1. Default 2048, 8192,
  // 32768.
  std::vector<int64_t> decode_positions = {2048, 8192, 32768};
  // Kernel threads (kernels::SetCpuThreads); 0 keeps the kernels' default.
  // Default 0.
  int threads = 0;
  // Decode steps timed per row (at least; more while under min_seconds).
  // Default 8.
  int decode_steps = 8;
  // Sequences stepped together (Model::StepBatch) in each decode-only row,
  // one row per entry, each >= 1; decode tok/s then counts every sequence's
  // token. Default 1 (Model::Step).
  std::vector<int64_t> decode_batches = {1};
  // Seconds each timed measurement repeats for, at least one repetition.
  // Default 1.
  double min_seconds = 1.0;
  // tokenizer.json the random model ships. Required.
  std::string tokenizer_json;
  // Directory for the random model; empty = a fresh directory under the
  // system temp dir, removed at the end. Default empty.
  std::string model_dir;
  // Random weight seed. Default 0.
  uint64_t seed = 0;
  // The model (written in f32) is loaded once per entry, rows of each in
  // turn (engine::LoadOptions::weights_dtype; nullopt = as stored, f32).
  // Default {nullopt}.
  std::vector<std::optional<kernels::DType>> weights_dtypes = {std::nullopt};
  // How each load runs (engine::LoadOptions::resident): "offload" (the
  // model's own forward on the kernels) and/or "resident" (the resident
  // executor on the CPU device, for architectures that have one; others
  // give no resident rows). Default {"offload"}.
  std::vector<std::string> executors = {"offload"};
};

struct EngineBenchRow {
  std::string kind;  // "prefill" or "decode" (decode columns only)
  std::string arch;
  std::string preset;
  std::string weights_dtype;         // "auto", "f32", "bf16", "f16", "int8"
  std::string executor = "offload";  // or "resident"
  int threads = 0;
  int64_t tokens = 0;       // prompt length T
  int64_t read_tokens = 0;  // tokens the prefill read (JRT pads to M)
  double prefill_seconds = 0;
  double prefill_tokens_per_s = 0;
  double prefill_flops = 0;
  double prefill_gflops = 0;
  double sgemm_gflops = 0;
  // CPU seconds of the prefill (all threads; least over repetitions) and
  // the prefill's FLOPs per CPU second over the sgemm's: the ratio of the
  // two rates with time slices lost to other processes taken out (spinning
  // and stalls still count), for machines shared with other work.
  double prefill_cpu_seconds = 0;
  double cpu_efficiency = 0;
  int64_t decode_position = 0;            // tokens read before the steps
  int64_t decode_batch = 1;               // sequences per step
  double decode_tokens_per_s = 0;         // best step
  double decode_median_tokens_per_s = 0;  // median step
  double decode_bound_tokens_per_s = 0;
  double memory_gbps = 0;
  int64_t weight_bytes = 0;         // all weights, in their load dtype
  int64_t decode_weight_bytes = 0;  // weights one decode step reads
  int64_t state_bytes = 0;          // at decode_position
  int64_t peak_rss_bytes = 0;
  bool peak_rss_reset = false;  // false: lifetime peak, see above
  double load_average = 0;      // 1-minute load average at the row's end
};

// Writes the model, then measures each prompt length and calls `on_row` as
// soon as its row is complete. INVALID_ARGUMENT for bad options or an
// unknown arch / preset; errors of the engine otherwise.
[[nodiscard]] absl::Status RunEngineBench(
    const EngineBenchOptions& options,
    absl::FunctionRef<void(const EngineBenchRow&)> on_row);

// Table output: a header (column names and units), then one line per row.
std::string EngineBenchTableHeader();
std::string EngineBenchTableRow(const EngineBenchRow& row);
// One JSON object, no trailing newline.
std::string EngineBenchRowJson(const EngineBenchRow& row);

// RunEngineBench printing to stdout as rows complete: the table (header,
// rows, a legend) or, with `json`, one JSON object per line.
[[nodiscard]] absl::Status PrintEngineBench(const EngineBenchOptions& options,
                                            bool json);

}  // namespace twice::bench

#endif  // TWICE_BENCH_ENGINE_BENCH_RUNNER_H_
