#include "engine/models/nemotron_h_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/feed_forward_mixer.h"
#include "engine/layers/llama_attention.h"
#include "engine/layers/mamba2_mixer.h"
#include "engine/layers/relu2_mlp.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kNemotronHEmbedding[] = "backbone.embeddings.weight";
constexpr char kNemotronHLmHead[] = "lm_head.weight";
// Tokens per layer-by-layer pass: bounds activation memory (the MLP holds
// [chunk, intermediate] floats) without changing results, since state
// passing is exact; a multiple of the checkpoints' SSD chunk (128).
// 512 prefilled faster than 1024 and with a lower peak (bench/README.md).
constexpr int64_t kNemotronHPrefillChunk = 512;

[[nodiscard]] absl::StatusOr<std::unique_ptr<Mixer>> LoadMixer(
    const WeightMap& w, const NemotronHConfig& c, int layer,
    const std::string& prefix) {
  switch (c.kind(layer)) {
    case NemotronHLayerKind::kMamba: {
      Mamba2MixerOptions o;
      o.dim = c.hidden_size;
      o.inner = c.mamba_inner();
      o.head_dim = c.mamba_head_dim;
      o.n_groups = c.n_groups;
      o.d_state = c.ssm_state_size;
      o.d_conv = c.conv_kernel;
      o.chunk = c.chunk_size;
      o.gated_norm_eps = c.norm_eps;
      TWICE_ASSIGN_OR_RETURN(auto m,
                             Mamba2Mixer::Load(w, prefix + "mixer.", o));
      return std::unique_ptr<Mixer>(std::move(m));
    }
    case NemotronHLayerKind::kAttention: {
      LlamaAttentionOptions o;
      o.dim = c.hidden_size;
      o.heads = c.num_heads;
      o.kv_heads = c.num_kv_heads;
      o.head_dim = c.head_dim;
      o.rotary = false;
      TWICE_ASSIGN_OR_RETURN(auto m,
                             LlamaAttention::Load(w, prefix + "mixer.", o));
      return std::unique_ptr<Mixer>(std::move(m));
    }
    case NemotronHLayerKind::kMlp: {
      TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Relu2Mlp> mlp,
                             Relu2Mlp::Load(w, prefix + "mixer.", c.hidden_size,
                                            c.intermediate_size));
      return std::unique_ptr<Mixer>(
          std::make_unique<FeedForwardMixer>(std::move(mlp)));
    }
  }
  return absl::InternalError("unknown Nemotron-H layer kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<NemotronHModel>> NemotronHModel::Create(
    NemotronHConfig config, WeightMap weights,
    std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint) {
  std::unique_ptr<NemotronHModel> m(new NemotronHModel());
  const NemotronHConfig& c = config;
  const int64_t d = c.hidden_size;
  Parts p = PartsOf(c, c.vocab_size, std::move(weights), std::move(tokenizer),
                    std::move(fingerprint));
  const WeightMap& w = p.weights;
  TWICE_RETURN_IF_ERROR(
      LoadEmbeddingAndHead(w, kNemotronHEmbedding, kNemotronHLmHead,
                           c.tie_word_embeddings, {c.vocab_size, d}, p));
  for (int i = 0; i < c.num_layers(); ++i) {
    const std::string prefix = absl::StrCat("backbone.layers.", i, ".");
    Block b;
    TWICE_ASSIGN_OR_RETURN(
        b.norm1, RmsNormLayer::Load(w, prefix + "norm.weight", d, c.norm_eps));
    TWICE_ASSIGN_OR_RETURN(b.mixer, LoadMixer(w, c, i, prefix));
    p.blocks.push_back(std::move(b));
  }
  TWICE_ASSIGN_OR_RETURN(
      p.final_norm,
      RmsNormLayer::Load(w, "backbone.norm_f.weight", d, c.norm_eps));
  p.prefill_chunk = kNemotronHPrefillChunk;
  TWICE_RETURN_IF_ERROR(m->Finish(std::move(p)));
  m->config_ = std::move(config);
  return m;
}

}  // namespace twice::engine
