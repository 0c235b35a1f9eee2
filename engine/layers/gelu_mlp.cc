#include "engine/layers/gelu_mlp.h"

#include <cmath>
#include <vector>

#include "kernels/activations.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<GeluMlp>> GeluMlp::Load(
    const WeightMap& weights, const std::string& prefix, int64_t dim,
    int64_t hidden) {
  auto m = std::make_unique<GeluMlp>();
  TWICE_ASSIGN_OR_RETURN(
      m->fc1_, weights.GetMatrix(prefix + "fc1.weight", {hidden, dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->fc2_, weights.GetMatrix(prefix + "fc2.weight", {dim, hidden}));
  m->dim_ = dim;
  m->hidden_ = hidden;
  return m;
}

absl::Status GeluMlp::Forward(absl::Span<const float> x, int64_t tokens,
                              absl::Span<float> out) const {
  std::vector<float> u(tokens * hidden_);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, dim_, fc1_, hidden_, {}, absl::MakeSpan(u)));
  // The erf form, not the tanh approximation: upstream uses nn.GELU().
  kernels::Gelu(absl::MakeSpan(u));
  return kernels::Linear(u, tokens, hidden_, fc2_, dim_, {}, out);
}

}  // namespace twice::engine
