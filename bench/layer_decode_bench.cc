#include "bench/layer_decode_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/scratch_dir.h"
#include "bench/synthetic_state.h"
#include "engine/layers/llama_attention.h"
#include "engine/layers/mixer.h"
#include "engine/layers/rat_attention.h"
#include "engine/weights/safetensors_writer.h"
#include "engine/weights/weight_map.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::bench {
namespace {

constexpr char kPrefix[] = "layer.";

engine::Tensor Normal(engine::Shape shape, double std, std::mt19937_64& rng) {
  engine::Tensor t = engine::Tensor::Zeros(std::move(shape));
  std::normal_distribution<float> normal(0.0f, static_cast<float>(std));
  for (float& v : t.mutable_span()) v = normal(rng);
  return t;
}

// One layer's tensors, named as the engine's loaders read them under
// kPrefix: attention's q/k/v/o projections (full multi-head KV) and RAT's
// in/out projections with a gate bias.
std::map<std::string, engine::Tensor> LayerWeights(const LayerDecodeOptions& o,
                                                   std::mt19937_64& rng) {
  const int64_t d = o.dim, hd = o.dim / o.heads;
  const std::string a = absl::StrCat(kPrefix, "self_attn.");
  const std::string r = absl::StrCat(kPrefix, "seq_layer.");
  std::map<std::string, engine::Tensor> w;
  for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    w.emplace(absl::StrCat(a, name, ".weight"), Normal({d, d}, 0.02, rng));
  }
  w.emplace(r + "in_proj.weight",
            Normal({3 * d + 2 * o.rat_groups * hd, d}, 0.02, rng));
  w.emplace(r + "out_proj.weight", Normal({d, d}, 0.02, rng));
  w.emplace(r + "gate_bias", Normal({d}, 1.0, rng));
  return w;
}

struct Timed {
  double step_ms = 0;
  int64_t state_bytes = 0;
};

// `batch` states of `mixer` grown to `position`, then `steps` timed batched
// steps (after one untimed), each at the next position.
absl::StatusOr<Timed> TimeSteps(const engine::Mixer& mixer, int64_t dim,
                                int64_t position, int64_t batch, int steps,
                                std::mt19937_64& rng) {
  std::vector<std::unique_ptr<engine::LayerState>> states;
  std::vector<engine::LayerState*> views;
  for (int64_t b = 0; b < batch; ++b) {
    states.push_back(mixer.NewState());
    GrowLayerStateTo(*states.back(), position, rng);
    views.push_back(states.back().get());
  }
  const int64_t state_bytes = states.front()->ByteSize();
  std::vector<float> x(static_cast<size_t>(batch * dim)), out(x.size());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  std::vector<int64_t> positions(static_cast<size_t>(batch), position);
  std::vector<double> times;
  for (int step = 0; step <= steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    TWICE_RETURN_IF_ERROR(
        mixer.StepBatch(x, views, positions, absl::MakeSpan(out)));
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (step > 0) times.push_back(ms);  // the first step warms caches
    for (int64_t& p : positions) ++p;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  return Timed{times[times.size() / 2], state_bytes};
}

}  // namespace

absl::StatusOr<std::vector<LayerDecodeRow>> RunLayerDecodeBench(
    const LayerDecodeOptions& o) {
  if (o.dim < 2 || o.heads < 1 || o.dim % o.heads != 0 ||
      (o.dim / o.heads) % 2 != 0 || o.rat_groups < 1 ||
      o.heads % o.rat_groups != 0 || o.steps < 1 || o.batch_tokens < 0) {
    return absl::InvalidArgumentError(
        "bench: the layer rows need heads dividing the width into even head "
        "dimensions, groups dividing heads, at least one step and "
        "batch_tokens >= 0");
  }
  for (int64_t v : o.positions) {
    if (v < 1)
      return absl::InvalidArgumentError("bench: positions must be >= 1");
  }
  for (int64_t v : o.chunk_sizes) {
    if (v < 1)
      return absl::InvalidArgumentError("bench: chunk sizes must be >= 1");
  }
  std::mt19937_64 rng(o.seed);
  TWICE_ASSIGN_OR_RETURN(std::string dir, MakeTempDir());
  TempDir cleanup(dir);
  const std::map<std::string, engine::Tensor> weights = LayerWeights(o, rng);
  std::vector<engine::NamedTensor> named;
  for (const auto& [name, tensor] : weights) named.push_back({name, &tensor});
  TWICE_RETURN_IF_ERROR(
      engine::WriteSafetensors(dir + "/model.safetensors", named));
  TWICE_ASSIGN_OR_RETURN(
      engine::WeightMap map,
      engine::WeightMap::OpenDir(
          dir, [](std::string_view name) { return std::string(name); },
          o.weights_dtype));

  engine::LlamaAttentionOptions ao;
  ao.dim = o.dim;
  ao.heads = o.heads;
  ao.kv_heads = o.heads;
  ao.head_dim = o.dim / o.heads;
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<engine::LlamaAttention> attention,
                         engine::LlamaAttention::Load(
                             map, absl::StrCat(kPrefix, "self_attn."), ao));
  std::vector<std::pair<int64_t, std::unique_ptr<engine::RatAttention>>> rats;
  for (int64_t chunk : o.chunk_sizes) {
    engine::RatAttentionOptions ro;
    ro.dim = o.dim;
    ro.heads = o.heads;
    ro.groups = o.rat_groups;
    ro.chunk_size = chunk;
    TWICE_ASSIGN_OR_RETURN(std::unique_ptr<engine::RatAttention> rat,
                           engine::RatAttention::Load(map, kPrefix, ro));
    rats.emplace_back(chunk, std::move(rat));
  }

  std::vector<LayerDecodeRow> rows;
  for (int64_t position : o.positions) {
    const int64_t batch = o.batch_tokens == 0
                              ? 1
                              : std::max<int64_t>(1, o.batch_tokens / position);
    auto row = [&](const engine::Mixer& mixer, const char* layer,
                   int64_t chunk) -> absl::Status {
      TWICE_ASSIGN_OR_RETURN(
          Timed t, TimeSteps(mixer, o.dim, position, batch, o.steps, rng));
      LayerDecodeRow r;
      r.layer = layer;
      r.chunk = chunk;
      r.position = position;
      r.batch = batch;
      r.step_ms = t.step_ms;
      r.tokens_per_second = static_cast<double>(batch) * 1000.0 / t.step_ms;
      r.state_bytes = t.state_bytes;
      rows.push_back(r);
      return absl::OkStatus();
    };
    TWICE_RETURN_IF_ERROR(row(*attention, "attention", 0));
    const double attention_rate = rows.back().tokens_per_second;
    rows.back().vs_attention = 1.0;
    for (const auto& [chunk, rat] : rats) {
      TWICE_RETURN_IF_ERROR(row(*rat, "rat", chunk));
      rows.back().vs_attention = rows.back().tokens_per_second / attention_rate;
    }
  }
  return rows;
}

std::string FormatLayerDecodeRows(const std::vector<LayerDecodeRow>& rows,
                                  bool json) {
  std::string out;
  if (json) {
    for (const LayerDecodeRow& r : rows) {
      nlohmann::json j = {{"kind", "layer_decode"},
                          {"layer", r.layer},
                          {"chunk", r.chunk},
                          {"position", r.position},
                          {"batch", r.batch},
                          {"step_ms", r.step_ms},
                          {"tokens_per_second", r.tokens_per_second},
                          {"state_bytes", r.state_bytes},
                          {"vs_attention", r.vs_attention}};
      absl::StrAppend(&out, j.dump(), "\n");
    }
    return out;
  }
  absl::StrAppend(
      &out, absl::StrFormat("%-10s %5s %9s %6s %10s %12s %12s %13s\n", "layer",
                            "L", "position", "batch", "step ms", "tokens/s",
                            "state MiB", "x attention"));
  for (const LayerDecodeRow& r : rows) {
    std::string paper;
    // The paper's single-layer figure (RAT fact sheet §2.7): L = 16 at the
    // 4K position generates about 9x faster than attention.
    if (r.layer == "rat" && r.chunk == 16 && r.position == 4096) {
      paper = "  (paper: ~9x)";
    }
    absl::StrAppend(
        &out,
        absl::StrFormat("%-10s %5s %9d %6d %10.3f %12.1f %12.2f %12.2fx%s\n",
                        r.layer, r.chunk == 0 ? "-" : absl::StrCat(r.chunk),
                        r.position, r.batch, r.step_ms, r.tokens_per_second,
                        static_cast<double>(r.state_bytes) / (1 << 20),
                        r.vs_attention, paper));
  }
  return out;
}

}  // namespace twice::bench
