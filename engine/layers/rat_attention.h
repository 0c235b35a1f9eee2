// RatAttention: the RAT sequence layer (Wei et al. 2025; fact sheet §2.4):
// an intra-chunk gated EMA of keys and values, then softmax attention over
// the chunk-final keys of earlier chunks plus the token's own running key.
//
// Token t in chunk c = ⌊t/L⌋ at offset l = t mod L; x̂ the normalised input:
//   [z̃ | v | g̃ | q̃ | k̃] = x̂ · W_in^T        W_in [3D + 2·G·hd, D]
//   z = σ(z̃);  g = σ(g̃ + gate_bias)           (f32, per channel)
//   q = tile(q̃, H/G), k = tile(k̃, H/G)       head h uses group h mod G
//   k̄_t = (1 − g)⊙k  if l = 0,  else g⊙k̄_{t−1} + (1 − g)⊙k;  v̄ likewise
//   q, k̄ <- RoPE rotate-half by the CHUNK index c (dim hd, base b)
//   o_t[h] = softmax over {K_c'[h] : c' < c} ∪ {k̄_t[h]} (scale hd^-1/2),
//            weighted sum of {V_c'[h]} ∪ {v̄_t[h]}  (K_c', V_c' = chunk finals)
//   out = (z ⊙ o) · W_out^T                     W_out [D, D]
// The model adds the layer's input (the un-normalised h) back, which is the
// layer's own residual upstream. Any (start_pos, tokens) split gives the
// same result: the EMA runs token by token and each token sees exactly the
// chunks closed before its own, so a prompt that is not a whole number of
// chunks needs no special path.
//
// Tensors under <prefix> (backbone.layers.{i}.): seq_layer.in_proj.weight,
// seq_layer.gate_bias [D], seq_layer.out_proj.weight. State:
// RatChunkKvState.
#ifndef TWICE_ENGINE_LAYERS_RAT_ATTENTION_H_
#define TWICE_ENGINE_LAYERS_RAT_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

struct RatAttentionOptions {
  int64_t dim = 0;         // D
  int64_t heads = 0;       // H; hd = D / H, even
  int64_t groups = 0;      // G, divides H
  int64_t chunk_size = 0;  // L
  float rope_base = 10000.0f;
};

class RatChunkKvState;

class RatAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RatAttention>> Load(
      const WeightMap& weights, const std::string& prefix,
      const RatAttentionOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  // One GEMM per projection for the B rows; the recurrence and the chunk
  // attention per sequence at its own position.
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  // For a device copy of the layer (engine/executor/).
  const RatAttentionOptions& options() const { return options_; }
  const Tensor& in_proj() const { return in_proj_; }
  const Tensor& gate_bias() const { return gate_bias_; }
  const Tensor& out_proj() const { return out_proj_; }

 private:
  RatAttention() = default;

  // The matching state that has read exactly `start_pos` tokens.
  [[nodiscard]] absl::StatusOr<RatChunkKvState*> CheckState(
      LayerState& state, int64_t start_pos) const;
  // Everything between the projections for `tokens` rows of one sequence:
  // proj [T, 3D + 2·G·hd] (in_proj output) -> z ⊙ o [T, D]; advances `st`.
  [[nodiscard]] absl::Status Mix(const float* proj, int64_t tokens,
                                 int64_t start_pos, RatChunkKvState& st,
                                 absl::Span<float> y) const;

  RatAttentionOptions options_;
  int64_t head_dim_ = 0;
  Tensor in_proj_, gate_bias_, out_proj_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_RAT_ATTENTION_H_
