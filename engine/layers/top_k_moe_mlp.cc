#include "engine/layers/top_k_moe_mlp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// One row's share of one expert: which row, and its gate.
struct Routed {
  int64_t row;
  float gate;
};

}  // namespace

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
  const int64_t d = shape_.dim, e = shape_.experts, k = shape_.top_k;
  TWICE_RETURN_IF_ERROR(shared_->Forward(x, tokens, out));
  std::vector<float> logits(tokens * e);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, router_, e, {}, absl::MakeSpan(logits)));

  // Route: each row's k largest logits, gated by a softmax over those k.
  std::vector<std::vector<Routed>> routed(e);
  std::vector<int64_t> order(e);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* r = logits.data() + t * e;
    // NaN ranks last, so the order stays strict (the NaN reaches the
    // output through the shared MLP anyway).
    auto key = [r](int64_t a) {
      return std::isnan(r[a]) ? -std::numeric_limits<float>::infinity() : r[a];
    };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&key](int64_t a, int64_t b) {
                        const float ka = key(a), kb = key(b);
                        return ka > kb || (ka == kb && a < b);
                      });
    const float top = r[order[0]];
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(double{r[order[j]]} - top);
    for (int64_t j = 0; j < k; ++j) {
      const double gate = std::exp(double{r[order[j]]} - top) / sum;
      routed[order[j]].push_back({t, static_cast<float>(gate)});
    }
  }

  // Each expert once, over the rows routed to it.
  std::vector<float> rows, result;
  for (int64_t j = 0; j < e; ++j) {
    const std::vector<Routed>& mine = routed[j];
    if (mine.empty()) continue;
    const int64_t n = static_cast<int64_t>(mine.size());
    rows.resize(n * d);
    result.resize(n * d);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(x.data() + mine[i].row * d, d, rows.data() + i * d);
    }
    TWICE_RETURN_IF_ERROR(
        experts_[j]->Forward(rows, n, absl::MakeSpan(result)));
    for (int64_t i = 0; i < n; ++i) {
      float* o = out.data() + mine[i].row * d;
      const float* y = result.data() + i * d;
      const float gate = mine[i].gate;
      for (int64_t c = 0; c < d; ++c) o[c] += gate * y[c];
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::engine
