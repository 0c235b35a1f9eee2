// PrefixLinearAttention: JRT-RNN prefix linear attention (PLA), the Based
// Taylor linear attention plus a non-causal encoder over the first M' tokens.
//
//   q  = x · Wq^T     -> [T, H, F]    Wq, Wk, Wk_enc [H·F, d]  (no bias,
//   kd = x · Wk^T     -> [T, H, F]                              no rotary)
//   vd = x · Wv^T     -> [T, H, hd]   Wv, Wv_enc [d, d], hd = d / H
//   ke = x_j · Wk_enc^T, ve = x_j · Wv_enc^T   for the first M' rows only
//   pads (rows [0, P)): kd_j = ke_j = 0 BEFORE phi, so phi(0) = (1, 0, ..., 0)
//     still adds weight 1 (times the unmasked v_j) to every numerator and
//     denominator; this reproduces the released code, it is not a true mask
//   phi(x) = [1, x / F^(1/4), vec(x x^T) / (sqrt 2 · sqrt F)]  D = 1 + F + F^2
//   prefix prefill (state empty), every query i in [0, T):
//     num_i = sum_{j<=i} (phi(q_i)·phi(kd_j)) vd_j + sum_{j<M'}
//     (phi(q_i)·phi(ke_j)) ve_j den_i = phi(q_i) · (sum_{j<=i} phi(kd_j) +
//     sum_{j<M'} phi(ke_j)) y_i   = num_i · (1 / (den_i + eps))
//   then S = sum_{j<M'} ve_j ⊗ phi(ke_j) + sum_{j<T} vd_j ⊗ phi(kd_j), z alike
//   (JRT eq. 4): the encoder is merged into the ordinary recurrent state.
//   causal reads (decode, or tokens after the prefix prefill): Based linear
//     attention with the decoder projections only, from that state.
//   out = y · Wo^T    Wo [d, d]
// eps = 1e-12 (PLA has no 1e-6 variant).
//
// Tensors under <prefix>: mixer.proj_q.weight, mixer.proj_k.weight,
// mixer.proj_v.weight, mixer.proj_k_enc.weight, mixer.proj_v_enc.weight,
// mixer.out_proj.weight. State: LinearAttentionState, the Based layout, so a
// JRT state costs no more than a Based one.
#ifndef TWICE_ENGINE_LAYERS_PREFIX_LINEAR_ATTENTION_H_
#define TWICE_ENGINE_LAYERS_PREFIX_LINEAR_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/layers/based_linear_attention.h"
#include "engine/layers/linear_attention_state.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class PrefixLinearAttention final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PrefixLinearAttention>>
  Load(const WeightMap& weights, const std::string& prefix,
       const LinearAttentionOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  // Causal read: Based linear attention with the decoder projections.
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  // Causal reads of one token per sequence: as Based (decoder projections).
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;
  // Prefix read. INVALID_ARGUMENT unless P <= M' <= tokens.
  [[nodiscard]] absl::Status ForwardPrefix(
      absl::Span<const float> x, int64_t tokens, const PrefixEncoding& prefix,
      LayerState& state, absl::Span<float> out) const override;

  // The loaded parameters, for an executor that keeps its own copy on a
  // device (engine/executor/resident_executor.h): the decoder's (the Based
  // core) and the encoder's keys [H·F, d] and values [d, d].
  const LinearAttentionCore& core() const { return core_; }
  const Tensor& wk_enc() const { return wk_enc_; }
  const Tensor& wv_enc() const { return wv_enc_; }

 private:
  PrefixLinearAttention() = default;

  // x rows -> raw keys [rows, H, F] with rows [0, masked) zeroed (the
  // feature map then sees zeros, as the released mask does), and values
  // [rows, d].
  [[nodiscard]] absl::Status KeysValues(absl::Span<const float> x, int64_t rows,
                                        int64_t masked, const Tensor& wk,
                                        const Tensor& wv, std::vector<float>& k,
                                        std::vector<float>& v) const;

  LinearAttentionCore core_;
  Tensor wk_enc_, wv_enc_;  // the encoder's keys and values
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_PREFIX_LINEAR_ATTENTION_H_
