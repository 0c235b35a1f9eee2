// RatModel: RAT (Wei et al. 2025, CLAIRE-Labo/RAT), optionally interleaved
// with sliding-window attention (RAT–SWA: even layers RAT, odd layers SWA).
//
//   x = E[tokens];  for each layer i:
//     x += RatAttention | RatSwaAttention (RMSNorm_in(x))   (own residual)
//     x += fc2(GELU(fc1(RMSNorm_ln(x))))
//   logits = RMSNorm_f(x_last) · E^T      (tied head)
//
// Tensors (upstream state dict under `task`): embedding.wte.weight [V, D],
// backbone.layers.{i}.seq_layer.{input_norm.weight, in_proj.weight,
// gate_bias, out_proj.weight}, backbone.layers.{i}.hidden_layer.{ln.weight,
// fc1.weight, fc2.weight}, backbone.ln.weight, head.lm_head.weight
// (optional: tied). State per layer: RatChunkKvState (RAT) or WindowKvState
// (SWA).
#ifndef TWICE_ENGINE_MODELS_RAT_MODEL_H_
#define TWICE_ENGINE_MODELS_RAT_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config/rat_config.h"
#include "engine/models/stacked_model.h"

namespace twice::engine {

class RatModel final : public StackedModel {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RatModel>> Create(
      RatConfig config, WeightMap weights, std::unique_ptr<Tokenizer> tokenizer,
      std::string fingerprint);

  const RatConfig& config() const { return config_; }

 private:
  RatModel() = default;
  RatConfig config_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_RAT_MODEL_H_
