// Engine throughput on CPU: prefill and decode steps of a random-weight
// Based model, and the state codec. Run from the repository root:
//   build/bench/engine_bench [--benchmark_filter=Prefill]
// Rates are printed as items (tokens or bytes) per second; compare ratios
// within one run, machines here are shared.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_codec.h"

namespace {

using twice::engine::Model;

// One model per preset, written once to a temporary directory.
const Model& LoadPreset(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(preset);
  if (it != models.end()) return *it->second;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("twice-bench-" + preset))
          .string();
  twice::engine::InitModelOptions options;
  options.preset = preset;
  options.out_dir = dir;
  if (!twice::engine::WriteRandomModel(options).ok()) std::abort();
  auto model = twice::engine::LoadModel(dir);
  if (!model.ok()) std::abort();
  std::filesystem::remove_all(dir);
  return *(models[preset] = *std::move(model));
}

std::vector<int32_t> Tokens(int64_t n) {
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i)
    tokens[i] = static_cast<int32_t>((i * 7919) % 50000);
  return tokens;
}

void BM_TinyPrefill(benchmark::State& state) {
  const Model& model = LoadPreset("tiny");
  const std::vector<int32_t> tokens = Tokens(state.range(0));
  for (auto _ : state) {
    auto seq = model.NewState();
    benchmark::DoNotOptimize(
        model.Prefill(tokens, *seq, twice::engine::PrefillMode::kCausal));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_TinyPrefill)
    ->Arg(128)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond);

void BM_TinyStep(benchmark::State& state) {
  const Model& model = LoadPreset("tiny");
  auto seq = model.NewState();
  if (!model.Prefill(Tokens(256), *seq, twice::engine::PrefillMode::kCausal)
           .ok()) {
    std::abort();
  }
  int32_t token = 11;
  for (auto _ : state) {
    benchmark::DoNotOptimize(model.Step(token, *seq));
    token = (token + 1) % 50000;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TinyStep)->Unit(benchmark::kMicrosecond);

void BM_StateEncode(benchmark::State& state) {
  const Model& model = LoadPreset("tiny");
  auto seq = model.NewState();
  if (!model.Prefill(Tokens(256), *seq, twice::engine::PrefillMode::kCausal)
           .ok()) {
    std::abort();
  }
  int64_t bytes = 0;
  for (auto _ : state) {
    std::string blob = twice::engine::EncodeState(*seq);
    bytes = static_cast<int64_t>(blob.size());
    benchmark::DoNotOptimize(blob);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_StateEncode);

void BM_StateDecode(benchmark::State& state) {
  const Model& model = LoadPreset("tiny");
  auto seq = model.NewState();
  if (!model.Prefill(Tokens(256), *seq, twice::engine::PrefillMode::kCausal)
           .ok()) {
    std::abort();
  }
  const std::string blob = twice::engine::EncodeState(*seq);
  for (auto _ : state) {
    auto target = model.NewState();
    benchmark::DoNotOptimize(twice::engine::DecodeStateInto(blob, *target));
  }
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(blob.size()));
}
BENCHMARK(BM_StateDecode);

}  // namespace

BENCHMARK_MAIN();
