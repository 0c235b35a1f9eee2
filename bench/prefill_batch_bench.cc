// Batched prefill on the resident executor's CPU device: B sequences of T
// tokens read one Prefill call after another, then the same B read in one
// PrefillBatch (passes of --chunk rows shared by sequences), in one process,
// alternated, best of --reps each. Prints a Markdown table; the ratio is the
// column to read (the machine's load moves both sides alike).
//
//   prefill_batch_bench [--arch=mamba2] [--preset=tiny] [--weights_dtype=f32]
//                       [--batches=4,16] [--tokens=32,128]
//                       [--chunk=512] [--reps=5] [--threads=2]
//
// Random weights of the preset (engine/models/init_model.h), written to a
// temporary directory and loaded with --weights_dtype. Run from the
// repository root (the GPT-2 tokenizer it ships).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bench/random_tokens.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/resident_executor.h"
#include "engine/layers/rat_attention.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/models/stacked_model.h"
#include "kernels/status_macros.h"
#include "kernels/threading.h"

ABSL_FLAG(std::string, arch, "mamba2", "architecture (twice init-model)");
ABSL_FLAG(std::string, preset, "tiny", "preset of the random weights");
ABSL_FLAG(std::string, weights_dtype, "f32", "auto, f32, bf16, f16 or int8");
ABSL_FLAG(std::vector<std::string>, batches,
          std::vector<std::string>({"4", "16"}),
          "sequences per read, one row each");
ABSL_FLAG(std::vector<std::string>, tokens,
          std::vector<std::string>({"32", "128"}),
          "tokens per sequence, one row each");
ABSL_FLAG(int64_t, chunk, twice::engine::kCpuPrefillChunk,
          "rows per prefill pass");
ABSL_FLAG(int, reps, 5, "repetitions of each side, alternated (best kept)");
ABSL_FLAG(int, threads, 2, "kernel threads");

namespace {

namespace engine = ::twice::engine;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string arch;
  std::string preset;
  std::string weights_dtype;
  std::vector<int64_t> batches;
  std::vector<int64_t> tokens;
  int64_t chunk = 0;
  int reps = 0;
  int threads = 0;
};

// The flags as Options; INVALID_ARGUMENT naming the first bad one.
absl::StatusOr<Options> OptionsFromFlags() {
  Options o;
  o.arch = absl::GetFlag(FLAGS_arch);
  o.preset = absl::GetFlag(FLAGS_preset);
  o.weights_dtype = absl::GetFlag(FLAGS_weights_dtype);
  o.chunk = absl::GetFlag(FLAGS_chunk);
  o.reps = absl::GetFlag(FLAGS_reps);
  o.threads = absl::GetFlag(FLAGS_threads);
  for (const auto& [name, in, out] :
       {std::tuple{"--batches", absl::GetFlag(FLAGS_batches), &o.batches},
        std::tuple{"--tokens", absl::GetFlag(FLAGS_tokens), &o.tokens}}) {
    for (const std::string& item : in) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(item, &v) || v < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": \"", item, "\" is not a count >= 1"));
      }
      out->push_back(v);
    }
    if (out->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
    }
  }
  if (o.chunk < 1 || o.reps < 1 || o.threads < 1) {
    return absl::InvalidArgumentError("--chunk, --reps and --threads are >= 1");
  }
  return o;
}

// Seconds of one read of `prompts` into fresh slots, one Prefill per
// sequence (batched = false) or one PrefillBatch.
absl::StatusOr<double> ReadOnce(
    engine::ResidentExecutor& executor,
    const std::vector<std::vector<int32_t>>& prompts, bool batched) {
  std::vector<engine::SlotId> slots;
  for (size_t b = 0; b < prompts.size(); ++b) {
    TWICE_ASSIGN_OR_RETURN(engine::SlotId slot, executor.NewSequence());
    slots.push_back(slot);
  }
  const auto t0 = Clock::now();
  absl::Status s;
  if (batched) {
    const std::vector<absl::Span<const int32_t>> reads(prompts.begin(),
                                                       prompts.end());
    s = executor.PrefillBatch(slots, reads).status();
  } else {
    for (size_t b = 0; b < prompts.size() && s.ok(); ++b) {
      s = executor.Prefill(slots[b], prompts[b]).status();
    }
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - t0).count();
  for (engine::SlotId slot : slots) {
    absl::Status released = executor.Release(slot);
    if (s.ok()) s = released;
  }
  TWICE_RETURN_IF_ERROR(s);
  return seconds;
}

absl::Status Run(const Options& o) {
  TWICE_RETURN_IF_ERROR(twice::kernels::SetCpuThreads(o.threads));
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "twice-prefill-batch-XXXXXX")
          .string();
  if (mkdtemp(dir_template.data()) == nullptr) {
    return absl::InternalError("cannot make a temporary directory");
  }
  const std::string dir = dir_template;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  engine::InitModelOptions init;
  init.architecture = o.arch;
  init.preset = o.preset;
  init.out_dir = dir;
  init.seed = 7;
  TWICE_RETURN_IF_ERROR(engine::WriteRandomModel(init));
  engine::LoadOptions load;
  TWICE_ASSIGN_OR_RETURN(load.weights_dtype,
                         engine::ParseWeightsDType(o.weights_dtype));
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model,
                         engine::LoadModel(dir, load));
  const auto* stacked = dynamic_cast<const engine::StackedModel*>(model.get());
  if (stacked == nullptr) {
    return absl::InvalidArgumentError("the model has no resident form");
  }
  int64_t most = 1;
  for (int64_t b : o.batches) most = std::max(most, b);
  int64_t longest = 1;
  for (int64_t t : o.tokens) longest = std::max(longest, t);
  engine::ResidentExecutorOptions options;
  options.slots = static_cast<int32_t>(most);
  options.prefill_chunk = o.chunk;
  // Paged states take whole blocks per sequence, of kv_block_size rows of
  // a token each (a KV cache) or of a chunk each (RAT's closed chunks).
  int64_t tokens_per_row = 1;
  for (const engine::StackedModel::Block& b : stacked->blocks()) {
    if (const auto* rat =
            dynamic_cast<const engine::RatAttention*>(b.mixer.get())) {
      tokens_per_row = std::max(tokens_per_row, rat->options().chunk_size);
    }
  }
  const int64_t block_tokens = options.kv_block_size * tokens_per_row;
  options.kv_cache_tokens =
      most * ((longest + block_tokens - 1) / block_tokens) * block_tokens;
  TWICE_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::ResidentExecutor> executor,
      engine::ResidentExecutor::Create(*stacked, engine::NewCpuExecutorDevice(),
                                       options));
  const int32_t vocab = model->description().vocab_size;

  double load_average[3] = {0, 0, 0};
  if (getloadavg(load_average, 3) < 1) load_average[0] = -1;
  std::printf(
      "%s %s, %s weights, passes of %lld rows, %d threads, load %.2f\n\n",
      o.arch.c_str(), o.preset.c_str(), o.weights_dtype.c_str(),
      static_cast<long long>(o.chunk), o.threads, load_average[0]);
  std::printf(
      "| B | T | one by one, tok/s | PrefillBatch, tok/s | batch / one by one "
      "|\n| --- | --- | --- | --- | --- |\n");
  for (int64_t batch : o.batches) {
    for (int64_t t : o.tokens) {
      std::vector<std::vector<int32_t>> prompts;
      for (int64_t b = 0; b < batch; ++b) {
        prompts.push_back(
            twice::bench::RandomTokenIds(t, vocab, static_cast<uint32_t>(b)));
      }
      // One warm-up of each, then alternated repetitions.
      TWICE_RETURN_IF_ERROR(ReadOnce(*executor, prompts, false).status());
      TWICE_RETURN_IF_ERROR(ReadOnce(*executor, prompts, true).status());
      double one = 1e30, together = 1e30;
      for (int rep = 0; rep < o.reps; ++rep) {
        TWICE_ASSIGN_OR_RETURN(double a, ReadOnce(*executor, prompts, false));
        TWICE_ASSIGN_OR_RETURN(double b, ReadOnce(*executor, prompts, true));
        one = std::min(one, a);
        together = std::min(together, b);
      }
      const double n = static_cast<double>(batch * t);
      std::printf("| %lld | %lld | %.0f | %.0f | %.2f |\n",
                  static_cast<long long>(batch), static_cast<long long>(t),
                  n / one, n / together, one / together);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "B sequences read one by one against one PrefillBatch "
      "(bench/prefill_batch_bench.cc)");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<Options> o = OptionsFromFlags();
  const absl::Status s = o.ok() ? Run(*o) : o.status();
  if (!s.ok()) {
    std::fprintf(stderr, "prefill_batch_bench: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
