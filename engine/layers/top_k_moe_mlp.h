// TopKMoeMlp: a mixture-of-experts MLP with a shared expert, as
// Granite-4.0-H's MoE models have it (transformers GraniteMoeHybridMoE plus
// shared_mlp; fact sheet §3.3):
//
//   r = x · router^T                        router [E, d] -> r [E] per row
//   S = the k experts with the largest r    raw logits, no bias; ties: the
//                                           lower expert index
//   g_e = softmax over S of r_e             (the k selected logits only)
//   out = Shared(x) + Σ_{e ∈ S} g_e · Expert_e(x)
//
// Shared and every Expert_e are FusedSwiGluMlps (gate rows first); the
// experts are slices of one stored tensor each: input_linear [E, 2I, d],
// output_linear [E, d, I]. Rows are independent, so a decode batch and a
// prefill chunk are the same call: the rows are grouped by expert and each
// expert runs once over its rows (kernels/top_k_routing.h: the routing,
// the gather and the combine in a fixed order).
//
// Tensors under <module> (model.layers.{i}.block_sparse_moe.):
// router.layer.weight, input_linear.weight, output_linear.weight.
#ifndef TWICE_ENGINE_LAYERS_TOP_K_MOE_MLP_H_
#define TWICE_ENGINE_LAYERS_TOP_K_MOE_MLP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/layers/feed_forward.h"
#include "engine/layers/fused_swiglu_mlp.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/weight_map.h"

namespace twice::engine {

struct TopKMoeShape {
  int64_t dim = 0;
  int64_t experts = 0;        // E
  int64_t top_k = 0;          // k, 1..E
  int64_t expert_hidden = 0;  // I
};

class TopKMoeMlp final : public FeedForward {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TopKMoeMlp>> Load(
      const WeightMap& weights, const std::string& module, TopKMoeShape shape,
      std::unique_ptr<FusedSwiGluMlp> shared);

  [[nodiscard]] absl::Status Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const override;

  const TopKMoeShape& shape() const { return shape_; }
  const Tensor& router() const { return router_; }  // [E, d]
  const FusedSwiGluMlp& expert(int64_t e) const { return *experts_[e]; }
  const FusedSwiGluMlp& shared() const { return *shared_; }

 private:
  TopKMoeShape shape_;
  Tensor router_;
  std::vector<std::unique_ptr<FusedSwiGluMlp>> experts_;
  std::unique_ptr<FusedSwiGluMlp> shared_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_TOP_K_MOE_MLP_H_
