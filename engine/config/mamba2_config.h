// Mamba2Config: the hyper-parameters of a Mamba-2 language model
// (state-spaces/mamba `MambaConfig` + `Mamba2` mixer defaults), parsed from
// either the upstream config.json or the HF-transformers conversion.
//
// Keys read (transformers aliases in parentheses; defaults after "="). The
// mixer keys are looked up at the top level first, then in `ssm_cfg`, as
// upstream passes mixer arguments through `ssm_cfg`:
//   d_model (hidden_size)                 D
//   n_layer (num_hidden_layers)
//   vocab_size                            tokenizer ids (padded below)
//   pad_vocab_size_multiple = 16          embedding rows = vocab rounded up
//                                         (the dataclass default is 8; every
//                                         public checkpoint says 16)
//   d_intermediate = 0                    must be 0: mixer-only blocks
//   d_state (state_size) = 128            N
//   d_conv (conv_kernel) = 4              K
//   expand = 2                            E = expand · D
//   headdim (head_dim) = 64               P; H = E / P
//   ngroups (n_groups) = 1                G; H must be a multiple of G
//   chunk_size = 256                      SSD chunk length Q of prefill
//   norm_epsilon (layer_norm_epsilon) = 1e-5
//   tie_embeddings (tie_word_embeddings) = true
//   eos_token_id = -1
//   training_context, else max_position_embeddings when > 0, else 2048
// Must hold when present: rms_norm true, norm_before_gate false, d_ssm null
// or E, D_has_hdim false, attn_layer_idx empty, use_bias false,
// use_conv_bias true (the layouts the engine implements). Unknown keys are
// ignored; invalid values are INVALID_ARGUMENT naming the key.
#ifndef TWICE_ENGINE_CONFIG_MAMBA2_CONFIG_H_
#define TWICE_ENGINE_CONFIG_MAMBA2_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::engine {

struct Mamba2Config {
  std::string architecture = "mamba2";
  int64_t hidden_size = 0;  // D
  int num_layers = 0;
  int64_t vocab_size = 0;
  int64_t pad_vocab_size_multiple = 16;
  int64_t d_state = 128;  // N
  int64_t d_conv = 4;     // K
  int64_t expand = 2;
  int64_t head_dim = 64;  // P
  int64_t n_groups = 1;   // G
  int64_t chunk_size = 256;
  float norm_eps = 1e-5f;
  bool tie_word_embeddings = true;
  int64_t eos_token_id = -1;
  int64_t training_context = 2048;
  // Sorted-key, whitespace-free re-serialisation: what the fingerprint
  // hashes.
  std::string canonical_json;

  // Derived dimensions (reference §1.2).
  int64_t d_inner() const { return expand * hidden_size; }    // E
  int64_t num_heads() const { return d_inner() / head_dim; }  // H
  int64_t conv_dim() const { return d_inner() + 2 * n_groups * d_state; }
  int64_t d_in_proj() const { return d_inner() + conv_dim() + num_heads(); }
  int64_t padded_vocab_size() const;
};

// True when `json` describes a Mamba-2 model: "architecture" or
// "model_type" is "mamba2", or ssm_cfg.layer is "Mamba2" (upstream configs
// carry neither of the first two keys).
bool IsMamba2ConfigJson(std::string_view json);

[[nodiscard]] absl::StatusOr<Mamba2Config> ParseMamba2Config(
    std::string_view json);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_CONFIG_MAMBA2_CONFIG_H_
