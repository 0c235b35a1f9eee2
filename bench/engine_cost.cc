#include "bench/engine_cost.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "engine/config/granite_hybrid_config.h"
#include "engine/config/json_fields.h"
#include "engine/config/llama_config.h"
#include "engine/config/mamba2_config.h"
#include "engine/config/nemotron_h_config.h"
#include "engine/config/rat_config.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"
#include "nlohmann/json.hpp"

namespace twice::bench {

absl::StatusOr<EngineCost> EngineCost::FromConfigJson(
    absl::string_view config_json) {
  const std::string_view text(config_json.data(), config_json.size());
  EngineCost cost;
  const std::string arch = engine::config::ConfigArchitecture(text);
  if (arch == "llama" || arch == "rat") {
    if (arch == "llama") {
      TWICE_ASSIGN_OR_RETURN(engine::LlamaConfig llama,
                             engine::ParseLlamaConfig(text));
      cost.params_ = LlamaParams(llama);
      const int64_t table = llama.vocab_size * llama.hidden_size;
      cost.decode_params_ =
          cost.params_ -
          (llama.tie_word_embeddings ? 0 : table - llama.hidden_size);
      cost.llama_ = std::move(llama);
      return cost;
    }
    TWICE_ASSIGN_OR_RETURN(engine::RatConfig rat, engine::ParseRatConfig(text));
    cost.params_ = RatParams(rat);
    const int64_t table = rat.vocab_size * rat.hidden_size;
    cost.decode_params_ =
        cost.params_ - (rat.tie_embedding ? 0 : table - rat.hidden_size);
    cost.rat_ = std::move(rat);
    return cost;
  }
  if (arch == "nemotron_h") {
    TWICE_ASSIGN_OR_RETURN(engine::NemotronHConfig c,
                           engine::ParseNemotronHConfig(text));
    cost.params_ = NemotronHParams(c);
    const int64_t table = c.vocab_size * c.hidden_size;
    cost.decode_params_ =
        cost.params_ - (c.tie_word_embeddings ? 0 : table - c.hidden_size);
    cost.nemotron_h_ = std::move(c);
    return cost;
  }
  if (arch == "granitemoehybrid") {
    TWICE_ASSIGN_OR_RETURN(engine::GraniteHybridConfig c,
                           engine::ParseGraniteHybridConfig(text));
    cost.params_ = GraniteParams(c);
    const int64_t table = c.vocab_size * c.hidden_size;
    // A decode step of one sequence reads k of the E experts of a layer.
    const int64_t idle_experts = c.num_layers() *
                                 (c.experts - c.experts_per_token) *
                                 GraniteExpertParams(c);
    cost.decode_params_ = cost.params_ - idle_experts -
                          (c.tie_word_embeddings ? 0 : table - c.hidden_size);
    cost.granite_ = std::move(c);
    return cost;
  }
  if (engine::IsMamba2ConfigJson(text)) {
    TWICE_ASSIGN_OR_RETURN(const engine::Mamba2Config m,
                           engine::ParseMamba2Config(text));
    const int64_t d = m.hidden_size;
    const int64_t vocab = m.padded_vocab_size();
    const int64_t per_layer = d + m.d_in_proj() * d +
                              m.conv_dim() * (m.d_conv + 1) +
                              3 * m.num_heads() + m.d_inner() + d * m.d_inner();
    cost.params_ = vocab * d + d + m.num_layers * per_layer +
                   (m.tie_word_embeddings ? 0 : vocab * d);
    cost.decode_params_ =
        cost.params_ - (m.tie_word_embeddings ? 0 : vocab * d - d);
    cost.mamba2_ = m;
    return cost;
  }
  TWICE_ASSIGN_OR_RETURN(cost.config_, engine::ParseBasedConfig(text));
  const engine::BasedConfig& c = cost.config_;
  cost.jrt_ = c.architecture == "jrt";
  if (cost.jrt_) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    cost.encoder_length_ = 1024;
    if (j.is_object()) {
      if (j.contains("alt_mixer") && j["alt_mixer"].is_object() &&
          j["alt_mixer"].contains("enc_length")) {
        cost.encoder_length_ = j["alt_mixer"]["enc_length"].get<int64_t>();
      }
      if (j.contains("enc_length")) {
        cost.encoder_length_ = j["enc_length"].get<int64_t>();
      }
    }
  }
  const int64_t d = c.hidden_size;
  const int64_t vocab = c.padded_vocab_size();
  const int64_t hf = c.linear_attention_heads * c.feature_dim;
  const int64_t hidden = c.mlp_hidden();
  const int64_t inner = c.conv_inner();
  int64_t params = vocab * d + d;  // embedding, ln_f
  int64_t encoder_params = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    params += 2 * d + 3 * hidden * d;  // norms, fc1 [2h, d], fc2 [d, h]
    switch (c.mixer(l)) {
      case engine::BasedMixerKind::kBaseConv:
        params += 2 * inner * d + 2 * inner + d * inner + d +
                  inner * c.conv_kernel_size;
        break;
      case engine::BasedMixerKind::kSlidingWindow:
        params += 4 * d * d;
        break;
      default:  // Based linear attention, or JRT prefix linear attention
        params += 2 * hf * d + 2 * d * d;
        if (cost.jrt_) encoder_params += hf * d + d * d;
        break;
    }
  }
  if (!c.tie_word_embeddings) params += vocab * d;
  cost.params_ = params + encoder_params;
  // Decode reads one embedding row; the LM head (tied or not) reads V x d.
  cost.decode_params_ = params - (c.tie_word_embeddings ? 0 : vocab * d - d);
  return cost;
}

int64_t EngineCost::ReadTokens(int64_t prompt) const {
  return jrt_ ? std::max(prompt, encoder_length_) : prompt;
}

int64_t EngineCost::LlamaParams(const engine::LlamaConfig& c) {
  const int64_t d = c.hidden_size;
  const int64_t per_layer = 2 * d + c.q_width() * d + 2 * c.kv_width() * d +
                            d * c.q_width() + 3 * c.intermediate_size * d;
  const int64_t table = c.vocab_size * d;
  return table + d + c.num_layers * per_layer +
         (c.tie_word_embeddings ? 0 : table);
}

int64_t EngineCost::RatParams(const engine::RatConfig& c) {
  const int64_t d = c.hidden_size;
  int64_t params = c.vocab_size * d + d;  // embedding, final norm
  for (int l = 0; l < c.num_layers; ++l) {
    params += 2 * d + d * d + 2 * c.ffn_hidden * d;  // norms, out, FFN
    params += c.is_swa(l) ? 3 * d * d : c.in_proj_rows() * d + d;  // + bias
  }
  return params + (c.tie_embedding ? 0 : c.vocab_size * d);
}

namespace {

// One hybrid Mamba-2 layer (Nemotron-H, Granite-4.0-H).
struct MambaDims {
  int64_t dim, heads, head_dim, groups, d_state, d_conv, chunk;
  int64_t inner() const { return heads * head_dim; }
  int64_t conv_dim() const { return inner() + 2 * groups * d_state; }
  int64_t in_proj() const { return inner() + conv_dim() + heads; }
};

int64_t MambaParams(const MambaDims& m) {
  return m.in_proj() * m.dim + m.conv_dim() * (m.d_conv + 1) + 3 * m.heads +
         m.inner() + m.dim * m.inner();
}

double MambaFlops(const MambaDims& m, int64_t prompt) {
  const double t = static_cast<double>(prompt);
  const double d = static_cast<double>(m.dim);
  const double e = static_cast<double>(m.inner());
  const double h = static_cast<double>(m.heads);
  const double p = static_cast<double>(m.head_dim);
  const double n = static_cast<double>(m.d_state);
  const double g = static_cast<double>(m.groups);
  // Σ over chunks of q(q+1): full chunks of Q plus the remainder.
  const int64_t q = m.chunk;
  const double rest = static_cast<double>(prompt % q);
  const double tri =
      static_cast<double>(prompt / q) * static_cast<double>(q * (q + 1)) +
      rest * (rest + 1.0);
  return 2.0 * t * d * static_cast<double>(m.in_proj()) + 2.0 * t * e * d +
         2.0 * static_cast<double>(m.d_conv * m.conv_dim()) * t + g * n * tri +
         h * p * tri + 4.0 * t * h * p * n;
}

// One NoPE GQA attention layer: q / k / v / o and 4·hd per (query, visible
// key) and head over a read from position 0.
struct AttentionDims {
  int64_t dim, heads, kv_heads, head_dim;
  int64_t q() const { return heads * head_dim; }
  int64_t kv() const { return kv_heads * head_dim; }
};

int64_t AttentionParams(const AttentionDims& a) {
  return 2 * a.q() * a.dim + 2 * a.kv() * a.dim;
}

double AttentionFlops(const AttentionDims& a, int64_t prompt) {
  const double t = static_cast<double>(prompt);
  const double d = static_cast<double>(a.dim);
  const double q = static_cast<double>(a.q());
  return 2.0 * t * d * (q + 2.0 * static_cast<double>(a.kv())) +
         2.0 * t * q * d + 2.0 * q * t * (t + 1.0);
}

MambaDims MambaOf(const engine::NemotronHConfig& c) {
  return {c.hidden_size,    c.mamba_heads, c.mamba_head_dim, c.n_groups,
          c.ssm_state_size, c.conv_kernel, c.chunk_size};
}
MambaDims MambaOf(const engine::GraniteHybridConfig& c) {
  return {c.hidden_size, c.mamba_heads, c.mamba_head_dim, c.n_groups,
          c.d_state,     c.d_conv,      c.chunk_size};
}
AttentionDims AttentionOf(const engine::NemotronHConfig& c) {
  return {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim};
}
AttentionDims AttentionOf(const engine::GraniteHybridConfig& c) {
  return {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim};
}

}  // namespace

int64_t EngineCost::NemotronHParams(const engine::NemotronHConfig& c) {
  const int64_t d = c.hidden_size;
  int64_t params = c.vocab_size * d + d;  // embeddings, norm_f
  for (int l = 0; l < c.num_layers(); ++l) {
    params += d;  // the layer's norm
    switch (c.kind(l)) {
      case engine::NemotronHLayerKind::kMamba:
        params += MambaParams(MambaOf(c));
        break;
      case engine::NemotronHLayerKind::kAttention:
        params += AttentionParams(AttentionOf(c));
        break;
      case engine::NemotronHLayerKind::kMlp:
        params += 2 * c.intermediate_size * d;
        break;
    }
  }
  return params + (c.tie_word_embeddings ? 0 : c.vocab_size * d);
}

double EngineCost::NemotronHPrefillFlops(const engine::NemotronHConfig& c,
                                         int64_t prompt) {
  const double t = static_cast<double>(prompt);
  const double d = static_cast<double>(c.hidden_size);
  double flops = 0.0;
  for (int l = 0; l < c.num_layers(); ++l) {
    switch (c.kind(l)) {
      case engine::NemotronHLayerKind::kMamba:
        flops += MambaFlops(MambaOf(c), prompt);
        break;
      case engine::NemotronHLayerKind::kAttention:
        flops += AttentionFlops(AttentionOf(c), prompt);
        break;
      case engine::NemotronHLayerKind::kMlp:
        flops += 4.0 * t * d * static_cast<double>(c.intermediate_size);
        break;
    }
  }
  return flops + 2.0 * d * static_cast<double>(c.vocab_size);
}

int64_t EngineCost::GraniteParams(const engine::GraniteHybridConfig& c) {
  const int64_t d = c.hidden_size;
  int64_t params = c.vocab_size * d + d;  // embeddings, final norm
  for (int l = 0; l < c.num_layers(); ++l) {
    params += 2 * d + 3 * c.intermediate_size * d;  // norms, shared MLP
    // Router and experts.
    params += c.experts * (d + GraniteExpertParams(c));
    params += c.is_attention[l] ? AttentionParams(AttentionOf(c))
                                : MambaParams(MambaOf(c));
  }
  return params + (c.tie_word_embeddings ? 0 : c.vocab_size * d);
}

int64_t EngineCost::GraniteExpertParams(const engine::GraniteHybridConfig& c) {
  return 3 * c.expert_intermediate_size * c.hidden_size;
}

double EngineCost::GranitePrefillFlops(const engine::GraniteHybridConfig& c,
                                       int64_t prompt) {
  const double t = static_cast<double>(prompt);
  const double d = static_cast<double>(c.hidden_size);
  double flops = 0.0;
  for (int l = 0; l < c.num_layers(); ++l) {
    flops += 6.0 * t * d * static_cast<double>(c.intermediate_size);
    // The router, and the k experts each token visits.
    flops += 2.0 * t * d * static_cast<double>(c.experts) +
             6.0 * t * d * static_cast<double>(c.experts_per_token) *
                 static_cast<double>(c.expert_intermediate_size);
    flops += c.is_attention[l] ? AttentionFlops(AttentionOf(c), prompt)
                               : MambaFlops(MambaOf(c), prompt);
  }
  return flops + 2.0 * d * static_cast<double>(c.vocab_size);
}

double EngineCost::LlamaPrefillFlops(const engine::LlamaConfig& c, double t) {
  const double d = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.q_width());
  const double kv = static_cast<double>(c.kv_width());
  const double per_layer =
      2.0 * t * d * (q + 2.0 * kv) + 2.0 * t * q * d + 2.0 * q * t * (t + 1.0) +
      6.0 * t * d * static_cast<double>(c.intermediate_size);
  return static_cast<double>(c.num_layers) * per_layer +
         2.0 * d * static_cast<double>(c.vocab_size);
}

double EngineCost::RatPrefillFlops(const engine::RatConfig& c, int64_t prompt) {
  const double t = static_cast<double>(prompt);
  const double d = static_cast<double>(c.hidden_size);
  // Σ_t (⌊t/L⌋ + 1) over t = 0..T-1: keys the chunk attention visits.
  const int64_t l = c.chunk_size, full = prompt / l, rest = prompt % l;
  const double chunk_keys =
      static_cast<double>(l) * static_cast<double>(full) *
          static_cast<double>(full - 1) / 2.0 +
      static_cast<double>(rest) * static_cast<double>(full) + t;
  // SWA: query i sees min(i, W) + 1 keys.
  const double window = static_cast<double>(c.window);
  const double w = std::min(window, t - 1.0);
  const double window_keys =
      (w + 1.0) * (w + 2.0) / 2.0 + (t - w - 1.0) * (window + 1.0);
  double flops = 0.0;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    flops += 2.0 * t * d * d + 4.0 * t * d * static_cast<double>(c.ffn_hidden);
    if (c.is_swa(layer)) {
      flops += 2.0 * t * d * 3.0 * d + 4.0 * d * window_keys;
    } else {
      flops += 2.0 * t * d * static_cast<double>(c.in_proj_rows()) +
               4.0 * d * chunk_keys;
    }
  }
  return flops + 2.0 * d * static_cast<double>(c.vocab_size);
}

double EngineCost::PrefillFlops(int64_t prompt) const {
  if (llama_.has_value()) {
    return LlamaPrefillFlops(*llama_, static_cast<double>(prompt));
  }
  if (rat_.has_value()) return RatPrefillFlops(*rat_, prompt);
  if (nemotron_h_.has_value()) {
    return NemotronHPrefillFlops(*nemotron_h_, prompt);
  }
  if (granite_.has_value()) return GranitePrefillFlops(*granite_, prompt);
  if (mamba2_.has_value()) {
    const engine::Mamba2Config& m = *mamba2_;
    const double t = static_cast<double>(prompt);
    const double d = static_cast<double>(m.hidden_size);
    const double e = static_cast<double>(m.d_inner());
    const double h = static_cast<double>(m.num_heads());
    const double p = static_cast<double>(m.head_dim);
    const double n = static_cast<double>(m.d_state);
    const double g = static_cast<double>(m.n_groups);
    // Σ over chunks of q(q+1): full chunks of Q plus the remainder.
    const int64_t q = m.chunk_size;
    const double full = static_cast<double>(prompt / q);
    const double rest = static_cast<double>(prompt % q);
    const double tri =
        full * static_cast<double>(q * (q + 1)) + rest * (rest + 1.0);
    const double per_layer =
        2.0 * t * d * static_cast<double>(m.d_in_proj()) + 2.0 * t * e * d +
        2.0 * static_cast<double>(m.d_conv * m.conv_dim()) * t + g * n * tri +
        h * p * tri + 4.0 * t * h * p * n;
    return static_cast<double>(m.num_layers) * per_layer +
           2.0 * d * static_cast<double>(m.padded_vocab_size());
  }
  const engine::BasedConfig& c = config_;
  const double t = static_cast<double>(ReadTokens(prompt));
  const double e =
      jrt_ ? static_cast<double>(std::min(encoder_length_, ReadTokens(prompt)))
           : 0.0;
  const double d = static_cast<double>(c.hidden_size);
  const double f = static_cast<double>(c.feature_dim);
  const double la_heads = c.linear_attention_heads;
  const double hf = la_heads * f;
  const double la_hd = d / la_heads;
  const double feat =
      static_cast<double>(kernels::TaylorFeatureDim(c.feature_dim));
  const double feature_map = 2.0 * f * f + f;  // per featurized vector
  const double hidden = static_cast<double>(c.mlp_hidden());
  const double inner = static_cast<double>(c.conv_inner());
  const double window = static_cast<double>(c.window_left());
  // Visible keys summed over the queries of one read from position 0:
  // query i sees min(i, W) + 1 keys.
  const double n = t, w = std::min(window, n - 1.0);
  const double visible_keys =
      (w + 1.0) * (w + 2.0) / 2.0 + (n - w - 1.0) * (window + 1.0);
  double flops = 0.0;
  for (int l = 0; l < c.num_layers; ++l) {
    flops += 2.0 * t * d * (2.0 * hidden) + 2.0 * t * hidden * d;  // MLP
    switch (c.mixer(l)) {
      case engine::BasedMixerKind::kBaseConv:
        flops += 2.0 * t * d * 2.0 * inner + 2.0 * t * inner * d +
                 2.0 * static_cast<double>(c.conv_kernel_size) * inner * t;
        break;
      case engine::BasedMixerKind::kSlidingWindow:
        flops += 2.0 * t * d * 3.0 * d + 2.0 * t * d * d +
                 4.0 * d * visible_keys;  // 4·hd per key and head = 4·d
        break;
      default: {  // (prefix) linear attention
        flops += 2.0 * t * d * (2.0 * hf + 2.0 * d);  // q, k, v, out
        flops += 2.0 * t * la_heads * feature_map;    // phi(q), phi(k)
        flops += t * la_heads * (4.0 * la_hd * feat + 4.0 * feat);
        if (jrt_) {
          flops += 2.0 * e * d * (hf + d) + e * la_heads * feature_map +
                   e * la_heads * (2.0 * la_hd * feat + feat);
        }
        break;
      }
    }
  }
  return flops + 2.0 * d * static_cast<double>(c.padded_vocab_size());
}

}  // namespace twice::bench
