#include "engine/layers/llama_mlp.h"

#include <vector>

#include "kernels/activations.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<LlamaMlp>> LlamaMlp::Load(
    const WeightMap& weights, const std::string& prefix, int64_t dim,
    int64_t hidden) {
  auto m = std::make_unique<LlamaMlp>();
  const std::string p = prefix + "mlp.";
  TWICE_ASSIGN_OR_RETURN(
      m->gate_, weights.GetMatrix(p + "gate_proj.weight", {hidden, dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->up_, weights.GetMatrix(p + "up_proj.weight", {hidden, dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->down_, weights.GetMatrix(p + "down_proj.weight", {dim, hidden}));
  m->dim_ = dim;
  m->hidden_ = hidden;
  return m;
}

absl::Status LlamaMlp::Forward(absl::Span<const float> x, int64_t tokens,
                               absl::Span<float> out) const {
  std::vector<float> g(tokens * hidden_), u(tokens * hidden_),
      a(tokens * hidden_);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, dim_, gate_, hidden_, {}, absl::MakeSpan(g)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, dim_, up_, hidden_, {}, absl::MakeSpan(u)));
  TWICE_RETURN_IF_ERROR(kernels::SiluMul(g, hidden_, u, hidden_, tokens,
                                         hidden_, absl::MakeSpan(a)));
  return kernels::Linear(a, tokens, hidden_, down_, dim_, {}, out);
}

}  // namespace twice::engine
