// twice-bench engine: prefill / decode speed of a random-weight model on this
// machine, next to ceilings measured in the same run (bench/
// engine_bench_runner.h). No server.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/engine_bench_runner.h"
#include "bench/harness/bench_commands.h"
#include "bench/layer_decode_bench.h"
#include "engine/models/model.h"
#include "kernels/threading.h"
#include "services/server/default_model.h"

ABSL_FLAG(std::vector<std::string>, tokens,
          (std::vector<std::string>{"512", "2048", "8192"}),
          "bench: prompt lengths, comma-separated, one row each");
ABSL_FLAG(std::vector<std::string>, decode_positions,
          (std::vector<std::string>{"2048", "8192", "32768"}),
          "bench: decode-only rows at these positions (state grown without "
          "reading), comma-separated; empty for none");
ABSL_FLAG(int32_t, threads, 0,
          "bench: kernel threads (0 = TWICE_CPU_THREADS or all CPUs)");
ABSL_FLAG(int32_t, decode_steps, 8, "bench: decode steps timed per row");
ABSL_FLAG(std::vector<std::string>, decode_batches,
          (std::vector<std::string>{"1"}),
          "bench: sequences stepped together in each decode-only row "
          "(StepBatch), comma-separated, one row each");
ABSL_FLAG(std::vector<std::string>, executor,
          (std::vector<std::string>{"offload"}),
          "bench: how each model runs, comma-separated, rows of each: offload "
          "(its own forward on the kernels) and/or resident (the resident "
          "executor on the CPU device)");
ABSL_FLAG(bool, layer_rows, false,
          "bench: instead of whole models, one mixer layer's batched decode "
          "step, attention against RAT at each --layer_chunks size, at each "
          "--layer_positions (bench/layer_decode_bench.h)");
ABSL_FLAG(std::vector<std::string>, layer_positions,
          (std::vector<std::string>{"4096", "16384", "32768"}),
          "bench: --layer_rows decode positions");
ABSL_FLAG(std::vector<std::string>, layer_chunks,
          (std::vector<std::string>{"16", "64"}),
          "bench: --layer_rows RAT chunk sizes");
ABSL_FLAG(int64_t, layer_batch_tokens, 65536,
          "bench: --layer_rows batch x position (batch = this / position, at "
          "least 1; 0 = batch 1)");

namespace twice::bench {

int RunBenchEngine(const CliContext& cli) {
  if (cli.args.size() != 1 || cli.args[0] != "engine") {
    return ReportError(
        cli, absl::InvalidArgumentError(
                 "usage: twice-bench engine "
                 "[--arch=based,jrt,mamba2,llama,rat] "
                 "[--preset=tiny|realistic|<preset>] [--tokens=512,2048,8192] "
                 "[--decode-positions=2048,8192,32768] [--threads=N] "
                 "[--weights_dtype=f32,bf16,int8] "
                 "[--executor=offload,resident] [--json] | --layer_rows "
                 "[--layer_positions=4096,16384,32768] [--layer_chunks=16,64] "
                 "[--layer_batch_tokens=65536]"));
  }
  bench::EngineBenchOptions options;
  options.arch = cli.arch;
  options.preset = cli.preset;
  options.tokenizer_json =
      cli.tokenizer.empty() ? services::BuiltinTokenizerPath() : cli.tokenizer;
  options.seed = cli.seed;
  options.threads = absl::GetFlag(FLAGS_threads);
  options.decode_steps = absl::GetFlag(FLAGS_decode_steps);
  options.weights_dtypes.clear();
  for (absl::string_view name :
       absl::StrSplit(cli.weights_dtype, ',', absl::SkipEmpty())) {
    absl::StatusOr<std::optional<engine::DType>> dtype =
        engine::ParseWeightsDType(std::string_view(name.data(), name.size()));
    if (!dtype.ok()) return ReportError(cli, dtype.status());
    options.weights_dtypes.push_back(*dtype);
  }
  if (options.weights_dtypes.empty()) options.weights_dtypes.push_back({});
  options.executors = absl::GetFlag(FLAGS_executor);
  auto parse_list = [&](const std::vector<std::string>& texts, const char* flag,
                        std::vector<int64_t>& out) -> absl::Status {
    out.clear();
    for (const std::string& t : texts) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(t, &n) || n < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bench: --", flag, ": \"", t, "\" is not a positive integer"));
      }
      out.push_back(n);
    }
    return absl::OkStatus();
  };
  if (absl::Status s =
          parse_list(absl::GetFlag(FLAGS_tokens), "tokens", options.tokens);
      !s.ok()) {
    return ReportError(cli, s);
  }
  if (absl::Status s = parse_list(absl::GetFlag(FLAGS_decode_positions),
                                  "decode-positions", options.decode_positions);
      !s.ok()) {
    return ReportError(cli, s);
  }
  if (absl::Status s = parse_list(absl::GetFlag(FLAGS_decode_batches),
                                  "decode-batches", options.decode_batches);
      !s.ok()) {
    return ReportError(cli, s);
  }
  if (absl::GetFlag(FLAGS_layer_rows)) {
    bench::LayerDecodeOptions layer;
    layer.seed = cli.seed;
    layer.steps = options.decode_steps;
    layer.batch_tokens = absl::GetFlag(FLAGS_layer_batch_tokens);
    layer.weights_dtype = options.weights_dtypes.front();
    if (absl::Status s = parse_list(absl::GetFlag(FLAGS_layer_positions),
                                    "layer_positions", layer.positions);
        !s.ok()) {
      return ReportError(cli, s);
    }
    if (absl::Status s = parse_list(absl::GetFlag(FLAGS_layer_chunks),
                                    "layer_chunks", layer.chunk_sizes);
        !s.ok()) {
      return ReportError(cli, s);
    }
    if (options.threads > 0) {
      if (absl::Status s = kernels::SetCpuThreads(options.threads); !s.ok()) {
        return ReportError(cli, s);
      }
    }
    absl::StatusOr<std::vector<bench::LayerDecodeRow>> rows =
        bench::RunLayerDecodeBench(layer);
    if (!rows.ok()) return ReportError(cli, rows.status());
    std::fputs(bench::FormatLayerDecodeRows(*rows, cli.json).c_str(), stdout);
    return 0;
  }
  if (absl::Status s = bench::PrintEngineBench(options, cli.json); !s.ok()) {
    return ReportError(cli, s);
  }
  return 0;
}

}  // namespace twice::bench
