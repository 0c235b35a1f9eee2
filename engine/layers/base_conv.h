// BaseConv: the Based gated short convolution mixer.
//
//   u  = x · in_proj^T + b_in           in_proj [2C, d], b_in [2C] -> u [T, 2C]
//   u1 = u[:, :C] (conv branch),  u2 = u[:, C:] (multiplier)
//   c[t, ch] = sum_{j<K} w[ch, j] · u1[t - (K-1) + j, ch]   (causal, depthwise,
//              no bias; earlier rows come from the state's tail)
//   out = (silu(c) · u2) · out_proj^T + b_out    out_proj [d, C], b_out [d]
// C = expand_proj · d / 2 (2d for the public checkpoints), K = 3.
//
// Tensors under <prefix>: mixer.in_proj.{weight,bias},
// mixer.out_proj.{weight,bias}, mixer.conv.conv.weight [C, 1, K]
// (a legacy "conv1" spelling is renamed to "conv" by the model's name rule).
// State: ShortConvState (tail of u1).
#ifndef TWICE_ENGINE_LAYERS_BASE_CONV_H_
#define TWICE_ENGINE_LAYERS_BASE_CONV_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/mixer.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class ShortConvState;

class BaseConv final : public Mixer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BaseConv>> Load(
      const WeightMap& weights, const std::string& prefix, int64_t dim,
      int64_t inner, int64_t kernel_size);

  std::unique_ptr<LayerState> NewState() const override;
  [[nodiscard]] absl::Status ValidateState(LayerState& state,
                                           int64_t start_pos) const override;
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const override;
  // One GEMM per projection for the whole batch; the 1-token convolution
  // runs per sequence against its own tail.
  [[nodiscard]] absl::Status StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const override;

  // The loaded parameters, for an executor that keeps its own copy on a
  // device (engine/executor/resident_executor.h). Views valid while the
  // mixer lives.
  struct Parameters {
    const Tensor& in_proj;   // [2C, d], any weight dtype
    const Tensor& in_bias;   // [2C]
    const Tensor& out_proj;  // [d, C], any weight dtype
    const Tensor& out_bias;  // [d]
    const Tensor& conv;      // [C, 1, K] f32
    int64_t dim;             // d
    int64_t inner;           // C
    int64_t kernel_size;     // K
  };
  Parameters parameters() const {
    return {in_proj_, in_bias_, out_proj_, out_bias_,
            conv_,    dim_,     inner_,    kernel_size_};
  }

 private:
  BaseConv() = default;

  // The matching ShortConvState, or FAILED_PRECONDITION.
  [[nodiscard]] absl::StatusOr<ShortConvState*> CheckState(
      LayerState& state) const;

  Tensor in_proj_, in_bias_, out_proj_, out_bias_, conv_;
  int64_t dim_ = 0;
  int64_t inner_ = 0;
  int64_t kernel_size_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_BASE_CONV_H_
