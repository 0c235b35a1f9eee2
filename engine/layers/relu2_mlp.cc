#include "engine/layers/relu2_mlp.h"

#include <vector>

#include "kernels/activations.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<Relu2Mlp>> Relu2Mlp::Load(
    const WeightMap& weights, const std::string& module, int64_t dim,
    int64_t hidden) {
  auto m = std::make_unique<Relu2Mlp>();
  TWICE_ASSIGN_OR_RETURN(
      m->up_, weights.GetMatrix(module + "up_proj.weight", {hidden, dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->down_, weights.GetMatrix(module + "down_proj.weight", {dim, hidden}));
  m->dim_ = dim;
  m->hidden_ = hidden;
  return m;
}

absl::Status Relu2Mlp::Forward(absl::Span<const float> x, int64_t tokens,
                               absl::Span<float> out) const {
  std::vector<float> u(tokens * hidden_);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, dim_, up_, hidden_, {}, absl::MakeSpan(u)));
  kernels::ReluSquared(absl::MakeSpan(u));
  return kernels::Linear(u, tokens, hidden_, down_, dim_, {}, out);
}

}  // namespace twice::engine
