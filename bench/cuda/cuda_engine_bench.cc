// The engine's own models on one GPU (--device=cuda's CudaKernelBackend):
// prefill and decode speed and the host <-> device bytes they move, as a
// Markdown table. This times the engine, not a second implementation of the
// forward; tests/cuda/device_check.sh runs it when the engine is built.
//
//   cuda_engine_bench [--models=based:360m-shape,mamba2:mamba2-130m-shape,
//                               llama:llama-360m-shape]
//                     [--tokens=2048,8192,32768] [--batch=16]
//                     [--decode_batches=1,16,64,256] [--reps=3]
//                     [--out=FILE]
//
// Rows per model (random weights of the preset, stored bf16 as published
// checkpoints are; the backend keeps them on the GPU as bf16):
//   prefill B=1, T        one sequence read in one Prefill call
//   prefill B=16, T=2048  16 sequences read at once from 16 threads
//   decode B              one StepBatch of B sequences (states after 64
//                         tokens), median step latency and tokens/s
// and, for models it runs (resident_layers.h lists them), the same
// phases through the resident executor
// (engine/executor/resident_executor.h: weights, workspace and states stay on
// the GPU; a decode step samples on the device and returns B ids):
//   executor prefill T    Prefill of one sequence (passes of
//                         kCudaPrefillChunk tokens, as the server's)
//   executor prefill B=16, T=2048
//                         16 sequences read in one PrefillBatch (passes
//                         of kCudaPrefillChunk rows, two sequences each:
//                         the products run on all of a pass's rows, the
//                         scans and attention per sequence)
//   executor prefill B=16, T=32 (and "one by one")
//                         16 short reads in one PrefillBatch (one pass:
//                         its scans and attention in one call each where
//                         the executor has that form), and the same 16
//                         read one Prefill after another
//   executor decode B     Step of B sequences (states after 64 tokens),
//                         greedy, beside its HBM bound: the bytes the step
//                         must read (bf16 weights + B states read and
//                         written) over the copy bandwidth measured in the
//                         same run, and the share of the step the host
//                         waited for the device (the rest it spent queueing
//                         kernels: launch-bound when the wait is small);
//                         the steps are replayed as recorded graphs
//                         (step_graphs.h), and "decode, no graph" rows
//                         run the same steps as they are, from an executor
//                         that does not record them
// Every row gives the bytes copied host -> device and device -> host per
// token (prefill) or per step (decode), read from the backend's (or the
// executor device's) counters, and the kernel calls the backend declined to
// the CPU. Times are wall clock of the engine call (the offload backend
// synchronises every op; an executor step ends when its ids are on the
// host), median of --reps after one warm-up.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/random_tokens.h"
#include "engine/executor/resident_executor.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/models/stacked_model.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_kernel_backend.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/stream.h"
#include "kernels/status_macros.h"

namespace twice::bench {
namespace {

using kernels::KernelBackendStats;
using kernels::cuda::CudaKernelBackend;

struct Options {
  std::vector<std::pair<std::string, std::string>> models = {
      {"based", "360m-shape"}, {"mamba2", "mamba2-130m-shape"}};
  std::vector<int64_t> tokens = {2048, 8192, 32768};
  int64_t batch = 16;
  std::vector<int64_t> decode_batches = {1, 16, 64, 256};
  int reps = 3;
  std::string out_file;
};

// The short reads' length of the executor's batched prefill rows.
constexpr int64_t kShortRead = 32;

struct Row {
  std::string model;
  std::string what;
  int64_t batch = 0;
  int64_t tokens = 0;  // per sequence (prefill) or 1 (decode)
  double ms = 0.0;
  double tokens_per_s = 0.0;
  double h2d_bytes = 0.0;  // per token (prefill) or per step (decode)
  double d2h_bytes = 0.0;
  int64_t declined = 0;
  double bound_ms = 0.0;  // executor decode: bytes read / copy bandwidth
  double wait_ms = -1.0;  // executor rows: host blocked on the device
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<int32_t> Tokens(int64_t n, uint32_t seed, int32_t vocab) {
  return twice::bench::RandomTokenIds(n, vocab, seed);
}

class Bench {
 public:
  Bench(Options options, std::shared_ptr<CudaKernelBackend> backend)
      : o_(std::move(options)), backend_(std::move(backend)) {}

  absl::Status RunModel(const std::string& arch, const std::string& preset);
  // Device-to-device copy bandwidth (GB/s, read + write), for the bounds.
  absl::Status MeasureCopyBandwidth();
  void Print(std::FILE* f) const;

 private:
  // Times `body` on `executor` into `row` (`units` per call).
  using MeasureFn = std::function<absl::Status(
      engine::ResidentExecutor& executor, Row& row, double units,
      const std::function<absl::Status()>& body)>;
  absl::Status ExecutorRows(const engine::StackedModel& model,
                            const std::string& name);
  absl::Status DecodeRows(engine::ResidentExecutor& executor, int32_t vocab,
                          const std::string& label, const std::string& what,
                          const MeasureFn& measure);
  // Times `body` (after one warm-up) and fills ms and the per-unit bytes.
  absl::Status Measure(Row& row, double units,
                       const std::function<absl::Status()>& body);

  const Options o_;
  std::shared_ptr<CudaKernelBackend> backend_;
  std::vector<Row> rows_;
  double copy_gbs_ = 0.0;
};

absl::Status Bench::MeasureCopyBandwidth() {
  namespace cuda = kernels::cuda;
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<cuda::Stream> stream,
                         cuda::Stream::Create(0));
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<cuda::EventTimer> timer,
                         cuda::EventTimer::Create());
  cuda::DeviceAllocator allocator(0);
  const int64_t bytes = int64_t{1} << 30;
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer a, allocator.Allocate(bytes));
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, allocator.Allocate(bytes));
  double best = 1e30;
  for (int r = 0; r < 4; ++r) {  // the first is a warm-up
    TWICE_RETURN_IF_ERROR(timer->Start(*stream));
    if (cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice,
                        stream->get()) != cudaSuccess) {
      return absl::InternalError("cudaMemcpyAsync device to device failed");
    }
    TWICE_RETURN_IF_ERROR(timer->Stop(*stream));
    TWICE_ASSIGN_OR_RETURN(float ms, timer->ElapsedMs());
    if (r > 0) best = std::min(best, static_cast<double>(ms));
  }
  copy_gbs_ = 2.0 * bytes / (best * 1e-3) / 1e9;
  return absl::OkStatus();
}

absl::Status Bench::ExecutorRows(const engine::StackedModel& model,
                                 const std::string& name) {
  int64_t max_batch = 1;
  for (int64_t b : o_.decode_batches) max_batch = std::max(max_batch, b);
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<engine::ExecutorDevice> device,
                         engine::NewCudaExecutorDevice(0));
  engine::ResidentExecutorOptions options;
  options.slots = static_cast<int32_t>(std::max(max_batch, o_.batch));
  options.prefill_chunk = engine::kCudaPrefillChunk;  // as the server
  // Full-attention KV room for the longest prefill, the batched prefill
  // (B x 2048) or the largest decode batch (64 tokens read, then the
  // warm-up and timed steps), one at a time.
  int64_t max_tokens = 0;
  for (int64_t t : o_.tokens) max_tokens = std::max(max_tokens, t);
  options.kv_cache_tokens = std::max(
      {max_tokens, o_.batch * 2048, max_batch * (64 + 16 * (o_.reps + 1))});
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::ResidentExecutor> executor,
      engine::ResidentExecutor::Create(model, std::move(device), options));
  const int32_t vocab = model.description().vocab_size;
  const std::string label = name + " (executor)";
  // Times `body` after one warm-up; bytes from the executor's device.
  const MeasureFn measure =
      [&](engine::ResidentExecutor& on, Row& row, double units,
          const std::function<absl::Status()>& body) -> absl::Status {
    TWICE_RETURN_IF_ERROR(body());
    const engine::DeviceTraffic before = on.device().traffic();
    std::vector<double> ms;
    for (int r = 0; r < o_.reps; ++r) {
      const double start = NowMs();
      TWICE_RETURN_IF_ERROR(body());
      ms.push_back(NowMs() - start);
    }
    const engine::DeviceTraffic after = on.device().traffic();
    const double runs = static_cast<double>(o_.reps) * units;
    row.ms = Median(ms);
    row.h2d_bytes = (after.bytes_to_device - before.bytes_to_device) / runs;
    row.d2h_bytes = (after.bytes_to_host - before.bytes_to_host) / runs;
    row.wait_ms = (after.host_wait_ns - before.host_wait_ns) / 1e6 / o_.reps;
    return absl::OkStatus();
  };
  for (int64_t t : o_.tokens) {
    const std::vector<int32_t> prompt = Tokens(t, 11, vocab);
    Row row{label, "prefill", 1, t};
    TWICE_RETURN_IF_ERROR(measure(*executor, row, static_cast<double>(t), [&] {
      TWICE_ASSIGN_OR_RETURN(engine::SlotId slot, executor->NewSequence());
      absl::Status s = executor->Prefill(slot, prompt).status();
      TWICE_RETURN_IF_ERROR(executor->Release(slot));
      return s;
    }));
    row.tokens_per_s = t / (row.ms / 1e3);
    rows_.push_back(row);
    std::fprintf(stderr, "%s prefill T=%lld: %.1f ms\n", label.c_str(),
                 static_cast<long long>(t), row.ms);
  }
  // B sequences of t tokens, in one PrefillBatch (`together`) or one
  // Prefill after another.
  const auto time_batch = [&](int64_t t, bool together) -> absl::Status {
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t s = 0; s < o_.batch; ++s) {
      prompts.push_back(Tokens(t, 300 + static_cast<uint32_t>(s), vocab));
    }
    Row row{label, together ? "prefill" : "prefill, one by one", o_.batch, t};
    TWICE_RETURN_IF_ERROR(
        measure(*executor, row, static_cast<double>(o_.batch * t), [&] {
          std::vector<engine::SlotId> slots;
          absl::Status s;
          for (size_t b = 0; b < prompts.size() && s.ok(); ++b) {
            absl::StatusOr<engine::SlotId> slot = executor->NewSequence();
            s = slot.status();
            if (s.ok()) slots.push_back(*slot);
          }
          const std::vector<absl::Span<const int32_t>> reads(prompts.begin(),
                                                             prompts.end());
          if (s.ok() && together) {
            s = executor->PrefillBatch(slots, reads).status();
          }
          for (size_t b = 0; b < slots.size() && s.ok() && !together; ++b) {
            s = executor->Prefill(slots[b], reads[b]).status();
          }
          for (engine::SlotId slot : slots) {
            absl::Status released = executor->Release(slot);
            if (s.ok()) s = released;
          }
          return s;
        }));
    row.tokens_per_s = o_.batch * t / (row.ms / 1e3);
    rows_.push_back(row);
    return absl::OkStatus();
  };
  if (o_.batch > 1) {
    TWICE_RETURN_IF_ERROR(time_batch(2048, /*together=*/true));
    // Short reads (questions' prompts): one pass of B reads, each of its
    // mixers in one call over the pass (the *Segments operations, full and
    // RAT attention as rows), against B passes of one read.
    TWICE_RETURN_IF_ERROR(time_batch(kShortRead, /*together=*/true));
    TWICE_RETURN_IF_ERROR(time_batch(kShortRead, /*together=*/false));
  }
  // Decode rows, with the steps recorded as graphs (the executor's
  // default) and, from a second executor, run as they are.
  TWICE_RETURN_IF_ERROR(DecodeRows(*executor, vocab, label, "decode", measure));
  const absl::Status graphs = executor->step_graphs_status();
  executor.reset();
  if (!graphs.ok()) {
    std::fprintf(stderr, "%s: steps not recorded as graphs: %s\n",
                 label.c_str(), std::string(graphs.message()).c_str());
    return absl::OkStatus();
  }
  TWICE_ASSIGN_OR_RETURN(device, engine::NewCudaExecutorDevice(0));
  options.step_graphs = false;
  TWICE_ASSIGN_OR_RETURN(executor, engine::ResidentExecutor::Create(
                                       model, std::move(device), options));
  return DecodeRows(*executor, vocab, label, "decode, no graph", measure);
}

absl::Status Bench::DecodeRows(engine::ResidentExecutor& executor,
                               int32_t vocab, const std::string& label,
                               const std::string& what,
                               const MeasureFn& measure) {
  for (int64_t b : o_.decode_batches) {
    std::vector<engine::SlotId> slots;
    for (int64_t s = 0; s < b; ++s) {
      TWICE_ASSIGN_OR_RETURN(engine::SlotId slot, executor.NewSequence());
      TWICE_RETURN_IF_ERROR(
          executor
              .Prefill(slot, Tokens(64, 500 + static_cast<uint32_t>(s), vocab))
              .status());
      slots.push_back(slot);
    }
    const std::vector<int32_t> next = Tokens(b, 900, vocab);
    const std::vector<kernels::SamplingRule> greedy(static_cast<size_t>(b));
    // One step more than measure's warm-up: a batch size's second step is
    // the one recorded, so the timed ones replay.
    TWICE_RETURN_IF_ERROR(executor.Step(next, slots, greedy).status());
    Row row{label, what, b, 1};
    TWICE_RETURN_IF_ERROR(measure(executor, row, 1.0, [&] {
      return executor.Step(next, slots, greedy).status();
    }));
    row.tokens_per_s = b / (row.ms / 1e3);
    // Fixed states are read and written; a KV cache is read (~64 tokens
    // per sequence) and one row written.
    const double bytes =
        static_cast<double>(executor.weight_bytes()) +
        2.0 * static_cast<double>(b) * executor.state_bytes_per_slot() +
        65.0 * static_cast<double>(b) * executor.kv_bytes_per_token();
    row.bound_ms = copy_gbs_ > 0.0 ? bytes / (copy_gbs_ * 1e9) * 1e3 : 0.0;
    rows_.push_back(row);
    std::fprintf(stderr, "%s %s B=%lld: %.3f ms (bound %.3f ms)\n",
                 label.c_str(), what.c_str(), static_cast<long long>(b), row.ms,
                 row.bound_ms);
    for (const engine::SlotId& slot : slots) {
      TWICE_RETURN_IF_ERROR(executor.Release(slot));
    }
  }
  return absl::OkStatus();
}

absl::Status Bench::Measure(Row& row, double units,
                            const std::function<absl::Status()>& body) {
  TWICE_RETURN_IF_ERROR(body());  // warm-up: weights uploaded, plans made
  std::vector<double> ms;
  const KernelBackendStats before = backend_->stats();
  for (int r = 0; r < o_.reps; ++r) {
    const double start = NowMs();
    TWICE_RETURN_IF_ERROR(body());
    ms.push_back(NowMs() - start);
  }
  const KernelBackendStats after = backend_->stats();
  const double runs = static_cast<double>(o_.reps) * units;
  row.ms = Median(ms);
  row.h2d_bytes = (after.bytes_to_device - before.bytes_to_device) / runs;
  row.d2h_bytes = (after.bytes_to_host - before.bytes_to_host) / runs;
  row.declined = (after.cpu_fallbacks - before.cpu_fallbacks) / o_.reps;
  return absl::OkStatus();
}

absl::Status Bench::RunModel(const std::string& arch,
                             const std::string& preset) {
  const std::string dir =
      (std::filesystem::temp_directory_path() /
       absl::StrCat("twice-cuda-bench-", arch, "-", ::getpid()))
          .string();
  engine::InitModelOptions init;
  init.architecture = arch;
  init.preset = preset;
  init.out_dir = dir;
  init.seed = 7;
  init.weights_dtype = engine::DType::kBF16;
  TWICE_RETURN_IF_ERROR(engine::WriteRandomModel(init));
  absl::StatusOr<std::unique_ptr<engine::Model>> loaded =
      engine::LoadModel(dir);
  std::filesystem::remove_all(dir);  // the mapping keeps the file alive
  if (!loaded.ok()) return loaded.status();
  const engine::Model& model = **loaded;
  const int32_t vocab = model.description().vocab_size;
  const std::string name = absl::StrCat(arch, " ", preset);

  for (int64_t t : o_.tokens) {
    const std::vector<int32_t> prompt = Tokens(t, 11, vocab);
    Row row{name, "prefill", 1, t};
    TWICE_RETURN_IF_ERROR(Measure(row, static_cast<double>(t), [&] {
      std::unique_ptr<engine::SequenceState> state = model.NewState();
      return model.Prefill(prompt, *state, engine::PrefillMode::kCausal)
          .status();
    }));
    row.tokens_per_s = t / (row.ms / 1e3);
    rows_.push_back(row);
    std::fprintf(stderr, "%s prefill T=%lld: %.1f ms\n", name.c_str(),
                 static_cast<long long>(t), row.ms);
  }

  if (o_.batch > 1) {
    const int64_t t = 2048;
    Row row{name, "prefill", o_.batch, t};
    TWICE_RETURN_IF_ERROR(Measure(row, static_cast<double>(o_.batch * t), [&] {
      std::vector<absl::Status> status(static_cast<size_t>(o_.batch));
      std::vector<std::thread> threads;
      for (int64_t b = 0; b < o_.batch; ++b) {
        threads.emplace_back([&, b] {
          const std::vector<int32_t> prompt =
              Tokens(t, 100 + static_cast<uint32_t>(b), vocab);
          std::unique_ptr<engine::SequenceState> state = model.NewState();
          status[b] =
              model.Prefill(prompt, *state, engine::PrefillMode::kCausal)
                  .status();
        });
      }
      for (std::thread& thread : threads) thread.join();
      for (const absl::Status& s : status) TWICE_RETURN_IF_ERROR(s);
      return absl::OkStatus();
    }));
    row.tokens_per_s = o_.batch * t / (row.ms / 1e3);
    rows_.push_back(row);
  }

  for (int64_t b : o_.decode_batches) {
    std::vector<std::unique_ptr<engine::SequenceState>> owned;
    std::vector<engine::SequenceState*> states;
    for (int64_t s = 0; s < b; ++s) {
      owned.push_back(model.NewState());
      TWICE_RETURN_IF_ERROR(
          model
              .Prefill(Tokens(64, 500 + static_cast<uint32_t>(s), vocab),
                       *owned.back(), engine::PrefillMode::kCausal)
              .status());
      states.push_back(owned.back().get());
    }
    const std::vector<int32_t> next = Tokens(b, 900, vocab);
    Row row{name, "decode", b, 1};
    TWICE_RETURN_IF_ERROR(Measure(
        row, 1.0, [&] { return model.StepBatch(next, states).status(); }));
    row.tokens_per_s = b / (row.ms / 1e3);
    rows_.push_back(row);
    std::fprintf(stderr, "%s decode B=%lld: %.2f ms\n", name.c_str(),
                 static_cast<long long>(b), row.ms);
  }
  const auto* stacked = dynamic_cast<const engine::StackedModel*>(&model);
  if (stacked != nullptr && engine::SupportsResident(*stacked).ok()) {
    TWICE_RETURN_IF_ERROR(ExecutorRows(*stacked, name));
  }
  return absl::OkStatus();
}

void Bench::Print(std::FILE* f) const {
  std::fprintf(f,
               "| model | phase | B | T | ms | tok/s | H2D bytes/unit | "
               "D2H bytes/unit | declined ops/run | HBM bound ms | %% of "
               "bound | host wait %% |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows_) {
    const std::string bound =
        r.bound_ms > 0.0 ? absl::StrFormat("%.3f | %.0f %%", r.bound_ms,
                                           100.0 * r.bound_ms / r.ms)
                         : std::string("- | -");
    const std::string wait =
        r.wait_ms >= 0.0 && r.ms > 0.0
            ? absl::StrFormat("%.0f %%", 100.0 * r.wait_ms / r.ms)
            : std::string("-");
    std::fprintf(f,
                 "| %s | %s | %lld | %lld | %.2f | %.0f | %.0f | %.0f | %lld | "
                 "%s | %s |\n",
                 r.model.c_str(), r.what.c_str(),
                 static_cast<long long>(r.batch),
                 static_cast<long long>(r.tokens), r.ms, r.tokens_per_s,
                 r.h2d_bytes, r.d2h_bytes, static_cast<long long>(r.declined),
                 bound.c_str(), wait.c_str());
  }
  std::fprintf(f,
               "\nCopy bandwidth (device to device, read + write): %.0f "
               "GB/s.",
               copy_gbs_);
  std::fprintf(f,
               "\nUnit: a token for prefill rows, a step for decode rows. "
               "Bytes are the activation and state copies of the offload "
               "backend, or what the executor moved (token ids, slot maps, "
               "sampling rules, sampled ids); weights are uploaded once and "
               "not counted. Host wait (executor rows): the share of the call "
               "the host spent blocked on the device; near 0 %% the call was "
               "bound by queueing its kernels (a CUDA graph of the step would "
               "remove that), near 100 %% by the device.\n");
}

bool ParseList(const std::string& value, std::vector<int64_t>& out) {
  out.clear();
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    char* end = nullptr;
    const std::string text(part);
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v <= 0) return false;
    out.push_back(v);
  }
  return !out.empty();
}

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--models") {
      o.models.clear();
      for (absl::string_view item : absl::StrSplit(value, ',')) {
        std::vector<std::string> parts = absl::StrSplit(item, ':');
        if (parts.size() != 2) return false;
        o.models.emplace_back(parts[0], parts[1]);
      }
    } else if (key == "--tokens") {
      if (!ParseList(value, o.tokens)) return false;
    } else if (key == "--decode_batches") {
      if (!ParseList(value, o.decode_batches)) return false;
    } else if (key == "--batch") {
      o.batch = std::atoll(value.c_str());
      if (o.batch < 1) return false;
    } else if (key == "--reps") {
      o.reps = std::atoi(value.c_str());
      if (o.reps < 1) return false;
    } else if (key == "--out") {
      o.out_file = value;
    } else {
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: cuda_engine_bench [--models=arch:preset,...] "
                 "[--tokens=2048,8192,32768] [--batch=16] "
                 "[--decode_batches=1,16,64,256] [--reps=3] [--out=FILE]\n");
    return 2;
  }
  if (kernels::cuda::DeviceCount() == 0) {
    std::printf("cuda_engine_bench: no CUDA device: skipped\n");
    return 77;
  }
  absl::StatusOr<std::shared_ptr<CudaKernelBackend>> backend =
      CudaKernelBackend::Create(0);
  if (!backend.ok()) {
    std::fprintf(stderr, "cuda_engine_bench: %s\n",
                 backend.status().ToString().c_str());
    return 1;
  }
  kernels::SetKernelBackend(*backend);
  Bench bench(options, *backend);
  int failed = 0;
  if (absl::Status s = bench.MeasureCopyBandwidth(); !s.ok()) {
    std::fprintf(stderr, "cuda_engine_bench: copy bandwidth: %s\n",
                 s.ToString().c_str());
    failed = 1;
  }
  for (const auto& [arch, preset] : options.models) {
    if (absl::Status s = bench.RunModel(arch, preset); !s.ok()) {
      std::fprintf(stderr, "cuda_engine_bench: %s %s: %s\n", arch.c_str(),
                   preset.c_str(), s.ToString().c_str());
      failed = 1;
    }
  }
  kernels::SetKernelBackend(nullptr);
  std::printf("Engine on %s (kernel lanes used: %d)\n\n",
              (*backend)->name().c_str(), (*backend)->lanes());
  bench.Print(stdout);
  if (!options.out_file.empty()) {
    if (std::FILE* f = std::fopen(options.out_file.c_str(), "a")) {
      std::fprintf(f, "\n## Engine on the GPU (cuda_engine_bench)\n\n");
      bench.Print(f);
      std::fclose(f);
    }
  }
  return failed;
}

}  // namespace
}  // namespace twice::bench

int main(int argc, char** argv) { return twice::bench::Main(argc, argv); }
