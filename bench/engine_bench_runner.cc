#include "bench/engine_bench_runner.h"

#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/engine_cost.h"
#include "bench/scratch_dir.h"
#include "bench/synthetic_state.h"
#include "engine/executor/resident_model.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/threading.h"
#include "nlohmann/json.hpp"

namespace twice::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds used by every thread of this process so far.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best wall time and least CPU time over the repetitions of one measurement.
struct Timing {
  double wall = 1e30;
  double cpu = 1e30;
  void Add(double wall_s, double cpu_s) {
    wall = std::min(wall, wall_s);
    cpu = std::min(cpu, cpu_s);
  }
};

[[nodiscard]] absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("bench: cannot read ", path));
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::move(buf).str();
}

// Resets VmHWM to the current RSS (Linux >= 4.0). False when refused.
// Heap memory already freed (the model writer's, the sgemm ceiling's
// matrices) goes back to the system first, so it does not count.
bool ResetPeakRss() {
  malloc_trim(0);
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

int64_t PeakRssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::atoll(line.c_str() + 6) * 1024;  // "VmHWM:   123 kB"
    }
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

double LoadAverage() {
  std::ifstream f("/proc/loadavg");
  double load = 0;
  f >> load;
  return load;
}

// Times y = x W^T with m = n = k = 2048 through kernels::Linear over
// repetitions filling `seconds` (the first, a warm-up, not counted).
constexpr double kSgemmFlops = 2.0 * 2048 * 2048 * 2048;
[[nodiscard]] absl::StatusOr<Timing> MeasureSgemm(double seconds) {
  constexpr int64_t kN = 2048;
  std::vector<float> x(kN * kN), w(kN * kN), y(kN * kN);
  for (int64_t i = 0; i < kN * kN; ++i) {
    x[i] = static_cast<float>((i * 7) % 13) * 0.01f;
    w[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  }
  Timing timing;
  double total = 0;
  for (int rep = 0; rep < 20 && (rep < 3 || total < seconds); ++rep) {
    const auto t0 = Clock::now();
    const double c0 = ProcessCpuSeconds();
    TWICE_RETURN_IF_ERROR(
        kernels::Linear(x, kN, kN, w, kN, {}, absl::MakeSpan(y)));
    const double s = SecondsSince(t0);
    if (rep > 0) timing.Add(s, ProcessCpuSeconds() - c0);
    total += s;
  }
  return timing;
}

// Streaming read bandwidth (GB/s) of a 512 MiB buffer (far beyond the
// caches) with one thread per kernel thread, best of five passes.
double MeasureBandwidth() {
  constexpr int64_t kFloats = int64_t{128} << 20;
  const int threads = std::max(1, kernels::CpuThreads());
  std::unique_ptr<float[]> buf(new float[kFloats]);
  const int64_t slice = (kFloats + threads - 1) / threads;
  std::vector<float> sums(threads);
  auto run = [&](bool fill) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        float* p = buf.get() + t * slice;
        const int64_t n = std::min(slice, kFloats - t * slice);
        if (fill) {  // first touch by the reading thread
          for (int64_t i = 0; i < n; ++i) p[i] = 1.0f;
          return;
        }
        // Four streams (the quarters of the slice), as a GEMV reads four
        // rows at once, with 16 independent sums each: one stream per
        // thread left the hardware prefetchers idle enough that the f32
        // decode steps read faster than this "bound" (23 against 28 GB/s
        // on an Intel Xeon, 2 threads).
        constexpr int kStreams = 4;
        constexpr int kLanes = 16;
        const int64_t quarter = n / kStreams / kLanes * kLanes;
        float a[kStreams][kLanes] = {};
        for (int64_t i = 0; i < quarter; i += kLanes) {
          for (int s = 0; s < kStreams; ++s) {
            for (int j = 0; j < kLanes; ++j) a[s][j] += p[s * quarter + i + j];
          }
        }
        float total = 0;
        for (const auto& lanes : a) {
          for (float v : lanes) total += v;
        }
        sums[t] = total;
      });
    }
    for (std::thread& th : pool) th.join();
  };
  run(true);
  double best = 1e30;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = Clock::now();
    run(false);
    best = std::min(best, SecondsSince(t0));
  }
  // Keep the sums observable so the reads are not optimised away.
  volatile float sink = 0;
  for (float s : sums) sink = sink + s;
  return static_cast<double>(kFloats) * sizeof(float) / best * 1e-9;
}

// Times Step() continuing `state` (best step; the median goes to JSON) and
// fills the decode columns of `row`, including the bound: one step reads
// the weights it needs and the whole state.
[[nodiscard]] absl::Status MeasureDecode(const engine::Model& model,
                                         const EngineCost& cost,
                                         const EngineBenchOptions& options,
                                         engine::SequenceState& state,
                                         EngineBenchRow& row) {
  row.decode_position = state.token_count();
  row.state_bytes = state.ByteSize();
  const int64_t batch = row.decode_batch;
  // The batch: `state` and batch - 1 copies of it, each its own sequence.
  std::vector<std::unique_ptr<engine::SequenceState>> copies;
  std::vector<engine::SequenceState*> states = {&state};
  for (int64_t b = 1; b < batch; ++b) {
    copies.push_back(state.Clone());
    states.push_back(copies.back().get());
  }
  std::vector<double> steps;
  std::vector<int32_t> tokens(static_cast<size_t>(batch));
  int32_t token = 11;
  const int32_t vocab = model.description().vocab_size;
  const auto decode_start = Clock::now();
  while (static_cast<int>(steps.size()) < options.decode_steps ||
         (SecondsSince(decode_start) < options.min_seconds &&
          steps.size() < 1000)) {
    for (int32_t& t : tokens) {
      t = token;
      token = (token + 101) % vocab;
    }
    const auto t0 = Clock::now();
    if (batch == 1) {
      TWICE_RETURN_IF_ERROR(model.Step(tokens[0], state).status());
    } else {
      TWICE_RETURN_IF_ERROR(model.StepBatch(tokens, states).status());
    }
    steps.push_back(SecondsSince(t0));
  }
  std::sort(steps.begin(), steps.end());
  row.decode_tokens_per_s = static_cast<double>(batch) / steps.front();
  row.decode_median_tokens_per_s =
      static_cast<double>(batch) / steps[steps.size() / 2];
  row.memory_gbps = MeasureBandwidth();
  const double bytes =
      row.weights_dtype == "bf16" || row.weights_dtype == "f16"
          ? 2.0
          : (row.weights_dtype == "int8" ? EngineCost::Int8BytesPerWeight()
                                         : 4.0);
  row.weight_bytes = cost.weight_bytes(bytes);
  row.decode_weight_bytes = cost.decode_weight_bytes(bytes);
  row.decode_bound_tokens_per_s =
      static_cast<double>(batch) * row.memory_gbps * 1e9 /
      static_cast<double>(row.decode_weight_bytes + batch * row.state_bytes);
  row.load_average = LoadAverage();
  return absl::OkStatus();
}

std::vector<int32_t> PromptTokens(int64_t n, int32_t vocab) {
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>((i * 7919) % vocab);
  }
  return tokens;
}

// A prefill row: Prefill(T tokens) into a fresh state, then decode from it.
[[nodiscard]] absl::Status MeasurePrefillRow(const engine::Model& model,
                                             const EngineCost& cost,
                                             const EngineBenchOptions& options,
                                             int64_t prompt,
                                             EngineBenchRow& row) {
  const engine::PrefillMode mode = cost.is_jrt() ? engine::PrefillMode::kPrefix
                                                 : engine::PrefillMode::kCausal;
  const std::vector<int32_t> tokens =
      PromptTokens(prompt, model.description().vocab_size);
  TWICE_ASSIGN_OR_RETURN(const Timing sgemm_before,
                         MeasureSgemm(options.min_seconds / 2));

  row.peak_rss_reset = ResetPeakRss();
  std::unique_ptr<engine::SequenceState> state;
  Timing prefill;
  double total = 0;
  for (int rep = 0; rep < 10 && (rep == 0 || total < options.min_seconds);
       ++rep) {
    state.reset();  // the previous state does not count towards this peak
    std::unique_ptr<engine::SequenceState> fresh = model.NewState();
    const auto t0 = Clock::now();
    const double c0 = ProcessCpuSeconds();
    TWICE_RETURN_IF_ERROR(model.Prefill(tokens, *fresh, mode).status());
    const double s = SecondsSince(t0);
    prefill.Add(s, ProcessCpuSeconds() - c0);
    total += s;
    state = std::move(fresh);
  }
  row.peak_rss_bytes = PeakRssBytes();
  TWICE_ASSIGN_OR_RETURN(const Timing sgemm_after,
                         MeasureSgemm(options.min_seconds / 2));

  row.tokens = prompt;
  row.read_tokens = cost.ReadTokens(prompt);
  row.prefill_seconds = prefill.wall;
  row.prefill_tokens_per_s = static_cast<double>(prompt) / prefill.wall;
  row.prefill_flops = cost.PrefillFlops(prompt);
  row.prefill_gflops = row.prefill_flops / prefill.wall * 1e-9;
  row.sgemm_gflops =
      kSgemmFlops / std::min(sgemm_before.wall, sgemm_after.wall) * 1e-9;
  row.prefill_cpu_seconds = prefill.cpu;
  row.cpu_efficiency =
      (row.prefill_flops / prefill.cpu) /
      (kSgemmFlops / std::min(sgemm_before.cpu, sgemm_after.cpu));
  return MeasureDecode(model, cost, options, *state, row);
}

// A decode row: a short real read, the state grown to `position`
// (synthetic_state.h), then decode from there.
[[nodiscard]] absl::Status MeasureDecodeRow(const engine::Model& model,
                                            const EngineCost& cost,
                                            const EngineBenchOptions& options,
                                            int64_t position,
                                            EngineBenchRow& row) {
  const int64_t read = std::min<int64_t>(position, 64);
  row.peak_rss_reset = ResetPeakRss();
  std::unique_ptr<engine::SequenceState> state = model.NewState();
  TWICE_RETURN_IF_ERROR(
      model
          .Prefill(PromptTokens(read, model.description().vocab_size), *state,
                   engine::PrefillMode::kCausal)
          .status());
  TWICE_RETURN_IF_ERROR(GrowStateTo(*state, position, options.seed));
  row.kind = "decode";
  row.peak_rss_bytes = PeakRssBytes();
  return MeasureDecode(model, cost, options, *state, row);
}

// The preset `preset` names for `arch`: "realistic" is each architecture's
// realistic shape; "width-2048" pairs rat-xl-shape with the Llama of the
// same width, depth and heads (llama-2048-width).
std::string PresetFor(std::string_view arch, const std::string& preset) {
  if (preset == "width-2048") {
    return arch == "llama" ? "llama-2048-width" : "rat-xl-shape";
  }
  if (preset != "realistic") return preset;
  if (arch == "mamba2") return "mamba2-130m-shape";
  if (arch == "llama") return "llama-360m-shape";
  if (arch == "rat") return "rat-xl-shape";
  if (arch == "nemotron_h") return "nemotron-h-8b-width";
  if (arch == "granitemoehybrid") return "granite-4.0-h-tiny-width";
  return "360m-shape";
}

[[nodiscard]] absl::Status RunOneArchitecture(
    const EngineBenchOptions& options, const std::string& arch,
    absl::FunctionRef<void(const EngineBenchRow&)> on_row) {
  TempDir cleanup;
  std::string dir = options.model_dir;
  if (dir.empty()) {
    TWICE_ASSIGN_OR_RETURN(dir, MakeTempDir());
    cleanup = TempDir(dir);
  }
  engine::InitModelOptions init;
  init.architecture = arch;
  init.preset = PresetFor(arch, options.preset);
  init.out_dir = dir;
  init.tokenizer_json = options.tokenizer_json;
  init.seed = options.seed;
  if (absl::Status s = engine::WriteRandomModel(init); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("bench: ", s.message()));
  }
  TWICE_ASSIGN_OR_RETURN(const std::string config_json,
                         ReadText(dir + "/config.json"));
  TWICE_ASSIGN_OR_RETURN(const EngineCost cost,
                         EngineCost::FromConfigJson(config_json));
  for (const std::optional<kernels::DType>& dtype : options.weights_dtypes) {
    for (const std::string& executor : options.executors) {
      engine::LoadOptions load;
      load.weights_dtype = dtype;
      load.resident = executor == "resident";
      const int64_t max_batch =
          std::max<int64_t>(1, *std::max_element(options.decode_batches.begin(),
                                                 options.decode_batches.end()));
      load.resident_slots = static_cast<int32_t>(max_batch);
      // KV room (full attention, RAT chunks) for the largest batch at the
      // longest prompt or furthest decode position, plus the steps timed
      // there (MeasureDecode takes up to max(decode_steps, 1000)).
      int64_t furthest = 0;
      for (int64_t t : options.tokens) furthest = std::max(furthest, t);
      for (int64_t p : options.decode_positions) {
        furthest = std::max(furthest, p);
      }
      load.resident_kv_tokens =
          max_batch *
          (furthest + std::max<int64_t>(options.decode_steps, 1000) + 16);
      TWICE_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model,
                             engine::LoadModel(dir, load));
      if (load.resident && !engine::IsResidentModel(*model)) continue;
      auto new_row = [&](std::string kind) {
        EngineBenchRow row;
        row.kind = std::move(kind);
        row.arch = arch;
        row.preset = init.preset;
        row.weights_dtype = engine::WeightsDTypeName(dtype);
        row.executor = executor;
        row.threads = kernels::CpuThreads();
        return row;
      };
      for (int64_t prompt : options.tokens) {
        EngineBenchRow row = new_row("prefill");
        TWICE_RETURN_IF_ERROR(
            MeasurePrefillRow(*model, cost, options, prompt, row));
        on_row(row);
      }
      for (int64_t position : options.decode_positions) {
        for (int64_t batch : options.decode_batches) {
          EngineBenchRow row = new_row("decode");
          row.decode_batch = batch;
          TWICE_RETURN_IF_ERROR(
              MeasureDecodeRow(*model, cost, options, position, row));
          on_row(row);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunEngineBench(
    const EngineBenchOptions& options,
    absl::FunctionRef<void(const EngineBenchRow&)> on_row) {
  if (options.tokens.empty() && options.decode_positions.empty()) {
    return absl::InvalidArgumentError(
        "bench: no prompt lengths and no decode positions");
  }
  for (int64_t t : options.tokens) {
    if (t < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench: prompt length ", t, " is not positive"));
    }
  }
  for (int64_t p : options.decode_positions) {
    if (p < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench: decode position ", p, " is not positive"));
    }
  }
  if (options.decode_batches.empty()) {
    return absl::InvalidArgumentError("bench: no decode batch sizes");
  }
  if (options.executors.empty()) {
    return absl::InvalidArgumentError("bench: no executor");
  }
  for (const std::string& e : options.executors) {
    if (e != "offload" && e != "resident") {
      return absl::InvalidArgumentError(absl::StrCat(
          "bench: --executor must list offload and/or resident, got \"", e,
          "\""));
    }
  }
  for (int64_t b : options.decode_batches) {
    if (b < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench: decode batch ", b, " is not positive"));
    }
  }
  const std::vector<std::string> archs =
      absl::StrSplit(options.arch, ',', absl::SkipEmpty());
  if (archs.empty()) return absl::InvalidArgumentError("bench: no arch");
  if (options.threads != 0) {
    TWICE_RETURN_IF_ERROR(kernels::SetCpuThreads(options.threads));
  }
  for (const std::string& arch : archs) {
    TWICE_RETURN_IF_ERROR(RunOneArchitecture(options, arch, on_row));
  }
  return absl::OkStatus();
}

std::string EngineBenchTableHeader() {
  return absl::StrFormat(
      "%-16s %-24s %-4s %3s | %6s %9s %8s %8s %5s %5s | %6s %3s %8s %8s %5s | "
      "%9s %9s %5s | %5s\n"
      "%-16s %-24s %-4s %3s | %6s %9s %8s %8s %5s %5s | %6s %3s %8s %8s %5s | "
      "%9s %9s %5s | %5s",
      "arch", "preset", "wts", "thr", "tokens", "prefill", "prefill", "sgemm",
      "ratio", "(cpu)", "pos", "B", "decode", "bound", "ratio", "state",
      "peak RSS", "/wts", "load", "", "", "", "", "", "tok/s", "GFLOP/s",
      "GFLOP/s", "%", "%", "", "", "tok/s", "tok/s", "%", "MiB", "MiB", "x",
      "1m");
}

std::string EngineBenchTableRow(const EngineBenchRow& r) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const std::string prefill =
      r.kind == "prefill"
          ? absl::StrFormat("%6d %9.1f %8.1f %8.1f %5.0f %5.0f", r.tokens,
                            r.prefill_tokens_per_s, r.prefill_gflops,
                            r.sgemm_gflops,
                            100.0 * r.prefill_gflops / r.sgemm_gflops,
                            100.0 * r.cpu_efficiency)
          : absl::StrFormat("%6s %9s %8s %8s %5s %5s", "-", "-", "-", "-", "-",
                            "-");
  return absl::StrFormat(
      "%-16s %-24s %-4s %3d | %s | %6d %3d %8.2f %8.2f %5.0f | %9.2f %8.0f%s "
      "%5.2f | %5.2f",
      r.executor == "resident" ? r.arch + "/resident" : r.arch, r.preset,
      r.weights_dtype, r.threads, prefill, r.decode_position, r.decode_batch,
      r.decode_tokens_per_s, r.decode_bound_tokens_per_s,
      100.0 * r.decode_tokens_per_s / r.decode_bound_tokens_per_s,
      static_cast<double>(r.state_bytes) / kMiB,
      static_cast<double>(r.peak_rss_bytes) / kMiB,
      r.peak_rss_reset ? " " : "*",
      static_cast<double>(r.peak_rss_bytes) /
          static_cast<double>(r.weight_bytes),
      r.load_average);
}

std::string EngineBenchRowJson(const EngineBenchRow& r) {
  nlohmann::json j;
  j["kind"] = r.kind;
  j["arch"] = r.arch;
  j["preset"] = r.preset;
  j["weights_dtype"] = r.weights_dtype;
  j["executor"] = r.executor;
  j["threads"] = r.threads;
  j["tokens"] = r.tokens;
  j["read_tokens"] = r.read_tokens;
  j["prefill_seconds"] = r.prefill_seconds;
  j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
  j["prefill_flops"] = r.prefill_flops;
  j["prefill_gflops"] = r.prefill_gflops;
  j["sgemm_gflops"] = r.sgemm_gflops;
  j["prefill_cpu_seconds"] = r.prefill_cpu_seconds;
  j["cpu_efficiency"] = r.cpu_efficiency;
  j["decode_position"] = r.decode_position;
  j["decode_batch"] = r.decode_batch;
  j["decode_tokens_per_s"] = r.decode_tokens_per_s;
  j["decode_median_tokens_per_s"] = r.decode_median_tokens_per_s;
  j["decode_bound_tokens_per_s"] = r.decode_bound_tokens_per_s;
  j["memory_gbps"] = r.memory_gbps;
  j["weight_bytes"] = r.weight_bytes;
  j["decode_weight_bytes"] = r.decode_weight_bytes;
  j["state_bytes"] = r.state_bytes;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["peak_rss_reset"] = r.peak_rss_reset;
  j["load_average"] = r.load_average;
  return j.dump();
}

absl::Status PrintEngineBench(const EngineBenchOptions& options, bool json) {
  bool first = true;  // the header waits for a row: errors print alone
  TWICE_RETURN_IF_ERROR(RunEngineBench(options, [&](const EngineBenchRow& row) {
    if (first && !json) std::printf("%s\n", EngineBenchTableHeader().c_str());
    first = false;
    const std::string line =
        json ? EngineBenchRowJson(row) : EngineBenchTableRow(row);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }));
  if (!json) {
    std::printf(
        "prefill: best of repetitions, GFLOP/s from the config's analytic "
        "FLOPs; sgemm: 2048^3 through kernels::Linear, same run;\n"
        "(cpu): the prefill / sgemm ratio in FLOPs per process CPU second "
        "(ignores time slices other processes took);\n"
        "decode: best step at position pos, B sequences per step (tok/s counts "
        "all B); bound = B x streaming-read bandwidth / (weight bytes one step "
        "reads + B x state bytes) (weights that fit in cache, e.g. tiny, beat "
        "it);\n"
        "rows with prefill \"-\": decode only, from a state grown to pos "
        "without reading (bench/synthetic_state.h); state = its bytes there;"
        "\n"
        "peak RSS: VmHWM over the prefill phase (* = not resettable: process "
        "peak); /wts = peak RSS / weight bytes in the load dtype (wts).\n");
  }
  return absl::OkStatus();
}

}  // namespace twice::bench
