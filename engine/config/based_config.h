// BasedConfig: the hyper-parameters of a Based or JRT-RNN model, parsed from
// a HuggingFace-style GPT-2 config.json as the public checkpoints ship it.
// JRT-RNN is Based with every linear-attention layer replaced by prefix
// linear attention (PLA), so one config type describes both.
//
// Keys read (GPT-2 aliases in parentheses; defaults after "="):
//   architecture | model_type   "based" or "jrt". model_type "gpt2" (upstream
//                               dumps GPT2Config) or no key at all is read by
//                               the mixer keys: "jrt" when
//                               alt_mixer._target_ ends in
//                               "PrefixLinearAttention", else "based"
//   n_embd (hidden_size)        d
//   n_layer (num_hidden_layers)
//   n_head (num_attention_heads)
//   n_inner = 4·d               MLP width before rounding, see mlp_hidden
//   vocab_size
//   pad_vocab_size_multiple = 8 embedding rows = vocab rounded up to this
//   layer_norm_epsilon = 1e-5
//   rotary_emb_base = 10000
//   alt_mixer.{feature_dim = 16, num_heads = n_head}   linear attention
//   alt_mixer_2.window_size                             sliding window
//   alt_mixer_layers, alt_mixer_2_layers = []           0-based layer indices
//   enc_length = 1024 (jrt only; top level or in alt_mixer, top level wins)
//                               the JRT encoder length M
//   prefix_pad_token_id = 220   (jrt only) the left-pad token of a prefix
//                               read shorter than M; upstream pads with GPT-2
//                               " " (220) and has no key for it
//   mixer.expand_proj = 4       BaseConv inner width = expand_proj · d / 2
//   eos_token_id = -1
//   training_context, else max_position_embeddings (n_positions) when > 0,
//     else 2048                 default ingest segment size
//   tie_word_embeddings = true
// Unknown keys are ignored. Invalid values are INVALID_ARGUMENT naming the
// key.
#ifndef TWICE_ENGINE_CONFIG_BASED_CONFIG_H_
#define TWICE_ENGINE_CONFIG_BASED_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace twice::engine {

enum class BasedMixerKind {
  kBaseConv,
  kLinearAttention,
  kSlidingWindow,
  kPrefixLinearAttention,  // JRT-RNN: the alt_mixer layers of a "jrt" model
};

struct BasedConfig {
  std::string architecture = "based";  // "based" | "jrt"
  int64_t hidden_size = 0;             // d
  int num_layers = 0;
  int num_heads = 0;  // sliding-window heads (n_head)
  int64_t n_inner = 0;
  int64_t vocab_size = 0;
  int64_t pad_vocab_size_multiple = 8;
  float norm_eps = 1e-5f;
  float rotary_base = 10000.0f;
  int64_t feature_dim = 16;        // linear attention F
  int linear_attention_heads = 0;  // alt_mixer.num_heads
  float linear_attention_eps = 1e-12f;
  int64_t window_size = 0;  // as configured; the left extent is half
  int64_t conv_expand_proj = 4;
  int64_t conv_kernel_size = 3;  // upstream ignores the config key; always 3
  std::vector<int> linear_attention_layers;
  std::vector<int> sliding_window_layers;
  int64_t eos_token_id = -1;
  // JRT encoder length M (enc_length); 0 for Based, which has no encoder.
  int64_t prefix_length = 0;
  int64_t prefix_pad_token_id = 220;  // jrt only
  int64_t training_context = 2048;
  bool tie_word_embeddings = true;
  // The config file re-serialised with sorted keys and no whitespace: what
  // the model fingerprint hashes.
  std::string canonical_json;

  // Derived values.
  int64_t padded_vocab_size() const;
  // Upstream GatedMlp rounds n_inner up to a multiple of 256.
  int64_t mlp_hidden() const;
  int64_t conv_inner() const { return conv_expand_proj * hidden_size / 2; }
  // Previous keys a sliding-window query sees: window_size / 2.
  int64_t window_left() const { return window_size / 2; }
  bool is_jrt() const { return architecture == "jrt"; }
  // Dispatch as upstream: sliding window wins over linear attention; a jrt
  // model's linear-attention layers are prefix linear attention.
  BasedMixerKind mixer(int layer) const;
};

[[nodiscard]] absl::StatusOr<BasedConfig> ParseBasedConfig(
    std::string_view json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_CONFIG_BASED_CONFIG_H_
