// Mamba2Mixer: the Mamba-2 (SSD) mixer of state-spaces/mamba `Mamba2`
// with the checkpoints' options (rmsnorm, norm_before_gate false, no
// projection biases, conv bias, D per head).
//
// Per token, input u [D] (already RMS-normalised by the block):
//   zxbcdt = W_in u                 W_in [2E + 2GN + H, D]
//   split  z [E] | xBC [E + 2GN] | dt_raw [H]
//   xBC'   = SiLU(conv_bias + causal depthwise conv_K(xBC))  (taps W_conv
//            [E + 2GN, 1, K]; the K-1 earlier raw rows come from the state)
//   split  x [H, P] | B [G, N] | C [G, N]          head h reads group
//                                                  h / (H / G)
//   Δ      = softplus(dt_raw + dt_bias), softplus(v) = v for v > 20
//   A      = -exp(A_log)            [H]
//   S, y   = SSD(x, Δ, A, B, C, D)  (kernels/ssd_chunk_scan.h)
//   v      = y ⊙ SiLU(z); per group of E/G channels v_g /= rms(v_g) (eps
//            gated_norm_eps); v ⊙= norm_w
//   out    = W_out v                W_out [D, E]
// E = H·P: expand·D in Mamba-2 checkpoints, mamba_num_heads · mamba_head_dim
// in Nemotron-H (so the mixer takes E, not expand).
//
// Tensors under <module> (backbone.layers.{i}.mixer. in Mamba-2 and
// Nemotron-H, model.layers.{i}.mamba. in Granite-4.0-H): in_proj.weight,
// conv1d.weight, conv1d.bias, dt_bias, A_log, D, norm.weight,
// out_proj.weight.
// State: Mamba2State. Forward (prefill) runs the chunked SSD form with the
// carried state as its initial state; StepBatch runs the recurrent form.
#ifndef TWICE_ENGINE_LAYERS_MAMBA2_MIXER_H_
#define TWICE_ENGINE_LAYERS_MAMBA2_MIXER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/layers/mamba2_state.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

// The mixer's dimensions, whichever config they come from.
struct Mamba2MixerOptions {
  int64_t dim = 0;       // D
  int64_t inner = 0;     // E = H·P
  int64_t head_dim = 0;  // P
  int64_t n_groups = 1;  // G; H a multiple of G
  int64_t d_state = 0;   // N
  int64_t d_conv = 4;    // K
  int64_t chunk = 256;   // SSD chunk length Q of prefill
  // Upstream Mamba-2 fixes it at 1e-5; Nemotron-H uses layer_norm_epsilon.
  double gated_norm_eps = 1e-5;

  int64_t heads() const { return inner / head_dim; }
  int64_t conv_dim() const { return inner + 2 * n_groups * d_state; }
  int64_t in_proj_dim() const { return inner + conv_dim() + heads(); }
};

class Mamba2Mixer final : public Mixer {
 public:
  // INVALID_ARGUMENT when the options do not divide (E by P, H by G).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Mamba2Mixer>> Load(
      const WeightMap& weights, const std::string& module,
      const Mamba2MixerOptions& options);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  // One GEMM per projection for the batch; conv and SSD step per sequence.
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  const Mamba2StateShape& state_shape() const { return shape_; }

  // The loaded parameters, for an executor that keeps its own copy on a
  // device (engine/executor/resident_executor.h). Views valid while the
  // mixer lives.
  struct Parameters {
    const Tensor& in_proj;      // [2E + 2GN + H, D], any weight dtype
    const Tensor& conv_w;       // [E + 2GN, 1, K] f32
    const Tensor& conv_b;       // [E + 2GN]
    const Tensor& dt_bias;      // [H]
    absl::Span<const float> a;  // -exp(A_log) [H]
    const Tensor& d;            // [H]
    const Tensor& norm_w;       // [E]
    const Tensor& out_proj;     // [D, E], any weight dtype
    int64_t dim;                // D
    int64_t inner;              // E
    int64_t groups;             // G
    int64_t chunk;              // Q
    double gated_norm_eps;
    Mamba2StateShape shape;
  };
  Parameters parameters() const {
    return {in_proj_, conv_w_, conv_b_,         dt_bias_, a_,
            d_,       norm_w_, out_proj_,       dim_,     inner_,
            groups_,  chunk_,  gated_norm_eps_, shape_};
  }

 private:
  Mamba2Mixer() = default;

  [[nodiscard]] absl::StatusOr<Mamba2State*> CheckState(
      LayerState& state) const;
  // y [rows, E] -> out [rows, D]: gate with SiLU(z), grouped RMSNorm,
  // out_proj.
  [[nodiscard]] absl::Status GateNormOut(absl::Span<const float> zxbcdt,
                                         std::vector<float>& y, int64_t rows,
                                         absl::Span<float> out) const;

  Tensor in_proj_, conv_w_, conv_b_, dt_bias_, d_, norm_w_, out_proj_;
  std::vector<float> a_;  // -exp(A_log) [H]
  int64_t dim_ = 0;       // D
  int64_t inner_ = 0;     // E
  int64_t groups_ = 0;    // G
  int64_t chunk_ = 0;     // Q
  int64_t in_proj_dim_ = 0;
  double gated_norm_eps_ = 1e-5;
  Mamba2StateShape shape_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_MAMBA2_MIXER_H_
