// SwiGluMlp: the Based "GatedMlp" (no biases).
//
//   u = x · fc1^T            fc1 [2h, d] -> u [T, 2h]
//   a = u[:, :h], g = u[:, h:]           (the SECOND half is the gate)
//   out = (a · silu(g)) · fc2^T          fc2 [d, h] -> out [T, d]
// h is n_inner rounded up to a multiple of 256 (BasedConfig::mlp_hidden).
// Tensors: <prefix>mlp.fc1.weight, <prefix>mlp.fc2.weight.
#ifndef TWICE_ENGINE_LAYERS_SWIGLU_MLP_H_
#define TWICE_ENGINE_LAYERS_SWIGLU_MLP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/layers/feed_forward.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

class SwiGluMlp final : public FeedForward {
 public:
  [[nodiscard]] static absl::StatusOr<SwiGluMlp> Load(const WeightMap& weights,
                                                      const std::string& prefix,
                                                      int64_t dim,
                                                      int64_t hidden);

  // x, out: [tokens, d].
  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const override;

  // The loaded parameters, for an executor that keeps its own copy on a
  // device (engine/executor/resident_executor.h).
  const Tensor& fc1() const { return fc1_; }  // [2·hidden, d]
  const Tensor& fc2() const { return fc2_; }  // [d, hidden]
  int64_t hidden() const { return hidden_; }

 private:
  Tensor fc1_;
  Tensor fc2_;
  int64_t dim_ = 0;
  int64_t hidden_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_SWIGLU_MLP_H_
