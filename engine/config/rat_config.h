// RatConfig: the hyper-parameters of a RAT model (Wei et al. 2025,
// CLAIRE-Labo/RAT), read from a flat config.json (upstream configures with
// Hydra; these keys carry the same values).
//
// Keys read (aliases in parentheses; defaults after "="):
//   architecture | model_type   "rat"
//   d_model (hidden_size)       D
//   num_layers (num_hidden_layers)
//   num_heads (num_attention_heads)   H; head_dim = D / H, even
//   ngroups = 2                 G_q, q/k groups tiled across heads; divides H
//   chunk_size = 16             L, tokens per chunk
//   ffn_hidden = 4·D            fc1 width (exact GELU FFN)
//   vocab_size
//   norm_eps = 1e-6             RMSNorm
//   rope_base = 10000           chunk-level RoPE (RAT) and token RoPE (SWA)
//   interleave_step = 0         0: every layer RAT. 2: even layers RAT, odd
//                               layers sliding-window attention (RAT-SWA)
//   window = 1024               SWA: a query sees keys with q - k <= window
//   tie_embedding = true
//   eos_token_id = -1
//   training_context = 4096
// Unknown keys are ignored; invalid values are INVALID_ARGUMENT.
#ifndef TWICE_ENGINE_CONFIG_RAT_CONFIG_H_
#define TWICE_ENGINE_CONFIG_RAT_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::engine {

struct RatConfig {
  std::string architecture = "rat";
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int64_t head_dim = 0;
  int ngroups = 2;
  int64_t chunk_size = 16;
  int64_t ffn_hidden = 0;
  int64_t vocab_size = 0;
  float norm_eps = 1e-6f;
  float rope_base = 10000.0f;
  int interleave_step = 0;
  int64_t window = 1024;
  bool tie_embedding = true;
  int64_t eos_token_id = -1;
  int64_t training_context = 4096;
  std::string canonical_json;

  // Rows of in_proj: z | v | g (D each) | q | k (G_q · hd each).
  int64_t in_proj_rows() const {
    return 3 * hidden_size + 2 * ngroups * head_dim;
  }
  // Sliding-window layers are the odd ones of an interleaved model.
  bool is_swa(int layer) const {
    return interleave_step == 2 && layer % 2 == 1;
  }
};

[[nodiscard]] absl::StatusOr<RatConfig> ParseRatConfig(std::string_view json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_CONFIG_RAT_CONFIG_H_
