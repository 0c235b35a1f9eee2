#include "engine/models/rat_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/gelu_mlp.h"
#include "engine/layers/rat_attention.h"
#include "engine/layers/rat_swa_attention.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<RatModel>> RatModel::Create(
    RatConfig config, WeightMap weights, std::unique_ptr<Tokenizer> tokenizer,
    std::string fingerprint) {
  std::unique_ptr<RatModel> m(new RatModel());
  const RatConfig& c = config;
  const int64_t d = c.hidden_size;
  const int64_t vocab = c.vocab_size;
  Parts p = PartsOf(c, vocab, std::move(weights), std::move(tokenizer),
                    std::move(fingerprint));
  const WeightMap& w = p.weights;
  TWICE_ASSIGN_OR_RETURN(p.embedding,
                         w.GetMatrix("embedding.wte.weight", {vocab, d}));
  if (c.tie_embedding) {
    p.lm_head = p.embedding;
    if (w.Has("head.lm_head.weight")) {
      TWICE_RETURN_IF_ERROR(w.Check("head.lm_head.weight", {vocab, d}));
    }
  } else {
    TWICE_ASSIGN_OR_RETURN(p.lm_head,
                           w.GetMatrix("head.lm_head.weight", {vocab, d}));
  }
  RatAttentionOptions ro;
  ro.dim = d;
  ro.heads = c.num_heads;
  ro.groups = c.ngroups;
  ro.chunk_size = c.chunk_size;
  ro.rope_base = c.rope_base;
  RatSwaOptions so;
  so.dim = d;
  so.heads = c.num_heads;
  so.window = c.window;
  so.rope_base = c.rope_base;
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string prefix = absl::StrCat("backbone.layers.", i, ".");
    Block b;
    TWICE_ASSIGN_OR_RETURN(
        b.norm1, RmsNormLayer::Load(w, prefix + "seq_layer.input_norm.weight",
                                    d, c.norm_eps));
    if (c.is_swa(i)) {
      TWICE_ASSIGN_OR_RETURN(b.mixer, RatSwaAttention::Load(w, prefix, so));
    } else {
      TWICE_ASSIGN_OR_RETURN(b.mixer, RatAttention::Load(w, prefix, ro));
    }
    TWICE_ASSIGN_OR_RETURN(
        b.norm2, RmsNormLayer::Load(w, prefix + "hidden_layer.ln.weight", d,
                                    c.norm_eps));
    TWICE_ASSIGN_OR_RETURN(
        b.ffn, GeluMlp::Load(w, prefix + "hidden_layer.", d, c.ffn_hidden));
    p.blocks.push_back(std::move(b));
  }
  TWICE_ASSIGN_OR_RETURN(
      p.final_norm, RmsNormLayer::Load(w, "backbone.ln.weight", d, c.norm_eps));
  TWICE_RETURN_IF_ERROR(m->Finish(std::move(p)));
  m->config_ = std::move(config);
  return m;
}

}  // namespace twice::engine
