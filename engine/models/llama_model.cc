#include "engine/models/llama_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/llama_attention.h"
#include "engine/layers/llama_mlp.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    LlamaConfig config, WeightMap weights, std::unique_ptr<Tokenizer> tokenizer,
    std::string fingerprint) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  const LlamaConfig& c = config;
  const int64_t d = c.hidden_size;
  const int64_t vocab = c.vocab_size;
  Parts p = PartsOf(c, vocab, std::move(weights), std::move(tokenizer),
                    std::move(fingerprint));
  const WeightMap& w = p.weights;
  TWICE_ASSIGN_OR_RETURN(p.embedding,
                         w.GetMatrix("model.embed_tokens.weight", {vocab, d}));
  if (c.tie_word_embeddings && !w.Has("lm_head.weight")) {
    p.lm_head = p.embedding;
  } else {
    TWICE_ASSIGN_OR_RETURN(p.lm_head,
                           w.GetMatrix("lm_head.weight", {vocab, d}));
  }
  LlamaAttentionOptions ao;
  ao.dim = d;
  ao.heads = c.num_heads;
  ao.kv_heads = c.num_kv_heads;
  ao.head_dim = c.head_dim;
  ao.rope_theta = c.rope_theta;
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string prefix = absl::StrCat("model.layers.", i, ".");
    Block b;
    TWICE_ASSIGN_OR_RETURN(
        b.norm1, RmsNormLayer::Load(w, prefix + "input_layernorm.weight", d,
                                    c.rms_norm_eps));
    TWICE_ASSIGN_OR_RETURN(b.mixer,
                           LlamaAttention::Load(w, prefix + "self_attn.", ao));
    TWICE_ASSIGN_OR_RETURN(
        b.norm2,
        RmsNormLayer::Load(w, prefix + "post_attention_layernorm.weight", d,
                           c.rms_norm_eps));
    TWICE_ASSIGN_OR_RETURN(b.ffn,
                           LlamaMlp::Load(w, prefix, d, c.intermediate_size));
    p.blocks.push_back(std::move(b));
  }
  TWICE_ASSIGN_OR_RETURN(
      p.final_norm,
      RmsNormLayer::Load(w, "model.norm.weight", d, c.rms_norm_eps));
  TWICE_RETURN_IF_ERROR(m->Finish(std::move(p)));
  m->config_ = std::move(config);
  return m;
}

}  // namespace twice::engine
