#include "engine/layers/top_k_moe_mlp.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/top_k_routing.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<TopKMoeMlp>> TopKMoeMlp::Load(
    const WeightMap& weights, const std::string& module, TopKMoeShape shape,
    std::unique_ptr<FusedSwiGluMlp> shared) {
  if (shape.experts < 1 || shape.top_k < 1 || shape.top_k > shape.experts ||
      shape.expert_hidden < 1 || shared == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        module,
        ": a mixture of experts needs 1 <= k <= E experts of width "
        ">= 1 and a shared MLP (E ",
        shape.experts, ", k ", shape.top_k, ", width ", shape.expert_hidden,
        ")"));
  }
  auto m = std::make_unique<TopKMoeMlp>();
  m->shape_ = shape;
  const int64_t e = shape.experts, d = shape.dim, i = shape.expert_hidden;
  TWICE_ASSIGN_OR_RETURN(
      m->router_, weights.GetMatrix(module + "router.layer.weight", {e, d}));
  TWICE_ASSIGN_OR_RETURN(
      std::vector<Tensor> inputs,
      weights.GetMatrixStack(module + "input_linear.weight", {e, 2 * i, d}));
  TWICE_ASSIGN_OR_RETURN(
      std::vector<Tensor> outputs,
      weights.GetMatrixStack(module + "output_linear.weight", {e, d, i}));
  for (int64_t j = 0; j < e; ++j) {
    TWICE_ASSIGN_OR_RETURN(
        auto expert, FusedSwiGluMlp::FromMatrices(std::move(inputs[j]),
                                                  std::move(outputs[j]), d, i));
    m->experts_.push_back(std::move(expert));
  }
  m->shared_ = std::move(shared);
  return m;
}

absl::Status TopKMoeMlp::Forward(absl::Span<const float> x, int64_t tokens,
                                 absl::Span<float> out) const {
  const int64_t d = shape_.dim, e = shape_.experts;
  TWICE_RETURN_IF_ERROR(shared_->Forward(x, tokens, out));
  std::vector<float> logits(tokens * e);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, router_, e, {}, absl::MakeSpan(logits)));
  TWICE_ASSIGN_OR_RETURN(kernels::TopKRoutes routes,
                         kernels::RouteTopK(logits, tokens, e, shape_.top_k));
  // Each expert once, over its block of the gathered rows.
  std::vector<float> rows(routes.source_row.size() * d);
  std::vector<float> results(rows.size());
  TWICE_RETURN_IF_ERROR(
      kernels::GatherRows(x, d, routes.source_row, absl::MakeSpan(rows)));
  for (int64_t j = 0; j < e; ++j) {
    const int64_t begin = routes.expert_begin[j];
    const int64_t n = routes.expert_begin[j + 1] - begin;
    if (n == 0) continue;
    TWICE_RETURN_IF_ERROR(experts_[j]->Forward(
        absl::MakeConstSpan(rows).subspan(begin * d, n * d), n,
        absl::MakeSpan(results).subspan(begin * d, n * d)));
  }
  return kernels::CombineRoutedRows(out, results, d, routes, /*scale=*/1.0f,
                                    /*accumulate=*/false, out);
}

}  // namespace twice::engine
