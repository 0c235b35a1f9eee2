#include "engine/models/granite_hybrid_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/fused_swiglu_mlp.h"
#include "engine/layers/llama_attention.h"
#include "engine/layers/mamba2_mixer.h"
#include "engine/layers/top_k_moe_mlp.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kGraniteEmbedding[] = "model.embed_tokens.weight";
constexpr char kGraniteLmHead[] = "lm_head.weight";
// Tokens per layer-by-layer pass: bounds activation memory without changing
// results (exact state passing); a multiple of the SSD chunk (256).
// 512 prefilled faster than 1024 and with a lower peak (bench/README.md).
constexpr int64_t kGranitePrefillChunk = 512;

[[nodiscard]] absl::StatusOr<std::unique_ptr<Mixer>> LoadMixer(
    const WeightMap& w, const GraniteHybridConfig& c, int layer,
    const std::string& prefix) {
  if (c.is_attention[layer]) {
    LlamaAttentionOptions o;
    o.dim = c.hidden_size;
    o.heads = c.num_heads;
    o.kv_heads = c.num_kv_heads;
    o.head_dim = c.head_dim;
    o.rotary = false;
    o.scale = c.attention_multiplier;
    TWICE_ASSIGN_OR_RETURN(auto m,
                           LlamaAttention::Load(w, prefix + "self_attn.", o));
    return std::unique_ptr<Mixer>(std::move(m));
  }
  Mamba2MixerOptions o;
  o.dim = c.hidden_size;
  o.inner = c.mamba_inner();
  o.head_dim = c.mamba_head_dim;
  o.n_groups = c.n_groups;
  o.d_state = c.d_state;
  o.d_conv = c.d_conv;
  o.chunk = c.chunk_size;
  o.gated_norm_eps = c.norm_eps;
  TWICE_ASSIGN_OR_RETURN(auto m, Mamba2Mixer::Load(w, prefix + "mamba.", o));
  return std::unique_ptr<Mixer>(std::move(m));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GraniteHybridModel>> GraniteHybridModel::Create(
    GraniteHybridConfig config, WeightMap weights,
    std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint) {
  std::unique_ptr<GraniteHybridModel> m(new GraniteHybridModel());
  const GraniteHybridConfig& c = config;
  const int64_t d = c.hidden_size;
  Parts p = PartsOf(c, c.vocab_size, std::move(weights), std::move(tokenizer),
                    std::move(fingerprint));
  const WeightMap& w = p.weights;
  TWICE_RETURN_IF_ERROR(
      LoadEmbeddingAndHead(w, kGraniteEmbedding, kGraniteLmHead,
                           c.tie_word_embeddings, {c.vocab_size, d}, p));
  for (int i = 0; i < c.num_layers(); ++i) {
    const std::string prefix = absl::StrCat("model.layers.", i, ".");
    Block b;
    TWICE_ASSIGN_OR_RETURN(
        b.norm1, RmsNormLayer::Load(w, prefix + "input_layernorm.weight", d,
                                    c.norm_eps));
    TWICE_ASSIGN_OR_RETURN(b.mixer, LoadMixer(w, c, i, prefix));
    TWICE_ASSIGN_OR_RETURN(
        b.norm2,
        RmsNormLayer::Load(w, prefix + "post_attention_layernorm.weight", d,
                           c.norm_eps));
    TWICE_ASSIGN_OR_RETURN(auto shared,
                           FusedSwiGluMlp::Load(w, prefix + "shared_mlp.", d,
                                                c.intermediate_size));
    if (c.experts == 0) {
      b.ffn = std::move(shared);
    } else {
      TWICE_ASSIGN_OR_RETURN(
          b.ffn, TopKMoeMlp::Load(w, prefix + "block_sparse_moe.",
                                  {d, c.experts, c.experts_per_token,
                                   c.expert_intermediate_size},
                                  std::move(shared)));
    }
    p.blocks.push_back(std::move(b));
  }
  TWICE_ASSIGN_OR_RETURN(
      p.final_norm, RmsNormLayer::Load(w, "model.norm.weight", d, c.norm_eps));
  p.prefill_chunk = kGranitePrefillChunk;
  p.embedding_scale = c.embedding_multiplier;
  p.residual_scale = c.residual_multiplier;
  p.logit_scale = 1.0f / c.logits_scaling;
  TWICE_RETURN_IF_ERROR(m->Finish(std::move(p)));
  m->config_ = std::move(config);
  return m;
}

}  // namespace twice::engine
