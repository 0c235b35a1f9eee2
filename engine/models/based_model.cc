#include "engine/models/based_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/base_conv.h"
#include "engine/layers/based_linear_attention.h"
#include "engine/layers/prefix_linear_attention.h"
#include "engine/layers/sliding_window_attention.h"
#include "engine/layers/swiglu_mlp.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kBasedEmbedding[] =
    "transformer.embeddings.word_embeddings.weight";
constexpr char kBasedLmHead[] = "lm_head.weight";
// Tokens per layer-by-layer pass. Bounds activation memory (the MLP holds
// [chunk, 2h] floats) without changing results, since state passing is exact.
// 512 is as fast as 1024 and lowers the prefill peak (bench/README.md).
constexpr int64_t kBasedPrefillChunk = 512;

[[nodiscard]] absl::StatusOr<std::unique_ptr<Mixer>> LoadMixer(
    const WeightMap& w, const BasedConfig& c, int layer,
    const std::string& prefix) {
  switch (c.mixer(layer)) {
    case BasedMixerKind::kBaseConv: {
      TWICE_ASSIGN_OR_RETURN(
          auto m, BaseConv::Load(w, prefix, c.hidden_size, c.conv_inner(),
                                 c.conv_kernel_size));
      return std::unique_ptr<Mixer>(std::move(m));
    }
    case BasedMixerKind::kLinearAttention:
    case BasedMixerKind::kPrefixLinearAttention: {
      LinearAttentionOptions o;
      o.dim = c.hidden_size;
      o.heads = c.linear_attention_heads;
      o.feature_dim = c.feature_dim;
      o.eps = c.linear_attention_eps;
      if (c.mixer(layer) == BasedMixerKind::kPrefixLinearAttention) {
        TWICE_ASSIGN_OR_RETURN(auto m,
                               PrefixLinearAttention::Load(w, prefix, o));
        return std::unique_ptr<Mixer>(std::move(m));
      }
      TWICE_ASSIGN_OR_RETURN(auto m, BasedLinearAttention::Load(w, prefix, o));
      return std::unique_ptr<Mixer>(std::move(m));
    }
    case BasedMixerKind::kSlidingWindow: {
      SlidingWindowOptions o;
      o.dim = c.hidden_size;
      o.heads = c.num_heads;
      o.window = c.window_left();
      o.rotary_base = c.rotary_base;
      TWICE_ASSIGN_OR_RETURN(auto m,
                             SlidingWindowAttention::Load(w, prefix, o));
      return std::unique_ptr<Mixer>(std::move(m));
    }
  }
  return absl::InternalError("unknown Based mixer kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<BasedModel>> BasedModel::Create(
    BasedConfig config, WeightMap weights, std::unique_ptr<Tokenizer> tokenizer,
    std::string fingerprint) {
  std::unique_ptr<BasedModel> m(new BasedModel());
  const int64_t d = config.hidden_size;
  const int64_t vocab = config.padded_vocab_size();
  Parts p = PartsOf(config, vocab, std::move(weights), std::move(tokenizer),
                    std::move(fingerprint));
  const WeightMap& w = p.weights;
  TWICE_RETURN_IF_ERROR(LoadEmbeddingAndHead(w, kBasedEmbedding, kBasedLmHead,
                                             config.tie_word_embeddings,
                                             {vocab, d}, p));
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string prefix = absl::StrCat("transformer.layers.", i, ".");
    Block b;
    TWICE_ASSIGN_OR_RETURN(
        b.norm1,
        RmsNormLayer::Load(w, prefix + "norm1.weight", d, config.norm_eps));
    TWICE_ASSIGN_OR_RETURN(b.mixer, LoadMixer(w, config, i, prefix));
    TWICE_ASSIGN_OR_RETURN(
        b.norm2,
        RmsNormLayer::Load(w, prefix + "norm2.weight", d, config.norm_eps));
    TWICE_ASSIGN_OR_RETURN(SwiGluMlp mlp,
                           SwiGluMlp::Load(w, prefix, d, config.mlp_hidden()));
    b.ffn = std::make_unique<SwiGluMlp>(std::move(mlp));
    p.blocks.push_back(std::move(b));
  }
  TWICE_ASSIGN_OR_RETURN(
      p.final_norm,
      RmsNormLayer::Load(w, "transformer.ln_f.weight", d, config.norm_eps));
  p.prefill_chunk = kBasedPrefillChunk;
  if (config.is_jrt()) {
    p.prefix_length = config.prefix_length;
    p.prefix_pad_token_id = config.prefix_pad_token_id;
  }
  TWICE_RETURN_IF_ERROR(m->Finish(std::move(p)));
  m->config_ = std::move(config);
  return m;
}

}  // namespace twice::engine
