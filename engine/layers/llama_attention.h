// LlamaAttention: causal softmax self-attention with grouped-query heads and
// rotary embeddings over a full KV cache (HF LlamaAttention, no biases).
//
//   q = x · Wq^T [T, H·hd]   k = x · Wk^T, v = x · Wv^T [T, H_kv·hd]
//   q, k <- RoPE rotate-half, base rope_theta, positions p = start_pos + i
//           (skipped without rotary: Nemotron-H's attention has no
//           positional encoding at all)
//   y_i[h] = softmax_j(q_i[h] · k_j[h/g] · scale) v_j[h/g], j in [0, p_i]
//   out = y · Wo^T            Wo [d, H·hd], g = H / H_kv, scale hd^-1/2
//                             unless the options set one
// The state keeps post-rotary keys (a cached key is never rotated again).
//
// Tensors under <module> (model.layers.{i}.self_attn. in Llama,
// backbone.layers.{i}.mixer. in Nemotron-H): q_proj.weight [H·hd, d],
// k_proj.weight / v_proj.weight [H_kv·hd, d], o_proj.weight [d, H·hd].
// State: FullKvState.
#ifndef TWICE_ENGINE_LAYERS_LLAMA_ATTENTION_H_
#define TWICE_ENGINE_LAYERS_LLAMA_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class FullKvState;

struct LlamaAttentionOptions {
  int64_t dim = 0;       // d
  int64_t heads = 0;     // H
  int64_t kv_heads = 0;  // H_kv, divides H
  int64_t head_dim = 0;  // hd, even with rotary
  bool rotary = true;
  float rope_theta = 10000.0f;
  // Softmax scale; 0: hd^-1/2. Granite-4.0-H sets attention_multiplier.
  float scale = 0.0f;
};

class LlamaAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LlamaAttention>> Load(
      const WeightMap& weights, const std::string& module,
      const LlamaAttentionOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  // One GEMM per projection for the B rows; rotary, cache append and
  // attention per sequence at its own position.
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  // For a device copy of the layer (engine/executor/).
  const LlamaAttentionOptions& options() const { return options_; }
  const Tensor& wq() const { return wq_; }
  const Tensor& wk() const { return wk_; }
  const Tensor& wv() const { return wv_; }
  const Tensor& wo() const { return wo_; }

 private:
  LlamaAttention() = default;

  // The matching cache that has read exactly `start_pos` tokens.
  [[nodiscard]] absl::StatusOr<FullKvState*> CheckState(
      LayerState& state, int64_t start_pos) const;
  // x [T, d] -> q [T, H·hd], k, v [T, H_kv·hd].
  [[nodiscard]] absl::Status Project(absl::Span<const float> x, int64_t rows,
                                     std::vector<float>& q,
                                     std::vector<float>& k,
                                     std::vector<float>& v) const;
  // Rotary, append and attention for `tokens` rows of one sequence (q, k, v
  // row-major, rotated in place); y [T, H·hd].
  [[nodiscard]] absl::Status Attend(float* q, float* k, const float* v,
                                    int64_t tokens, int64_t start_pos,
                                    FullKvState& kv, absl::Span<float> y) const;

  LlamaAttentionOptions options_;
  Tensor wq_, wk_, wv_, wo_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_LLAMA_ATTENTION_H_
