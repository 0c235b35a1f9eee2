#include "engine/layers/swiglu_mlp.h"

#include <vector>

#include "kernels/activations.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<SwiGluMlp> SwiGluMlp::Load(const WeightMap& weights,
                                          const std::string& prefix,
                                          int64_t dim, int64_t hidden) {
  SwiGluMlp mlp;
  TWICE_ASSIGN_OR_RETURN(mlp.fc1_, weights.GetMatrix(prefix + "mlp.fc1.weight",
                                                     {2 * hidden, dim}));
  TWICE_ASSIGN_OR_RETURN(
      mlp.fc2_, weights.GetMatrix(prefix + "mlp.fc2.weight", {dim, hidden}));
  mlp.dim_ = dim;
  mlp.hidden_ = hidden;
  return mlp;
}

absl::Status SwiGluMlp::Forward(absl::Span<const float> x, int64_t tokens,
                                absl::Span<float> out) const {
  std::vector<float> u(tokens * 2 * hidden_);
  std::vector<float> a(tokens * hidden_);
  TWICE_RETURN_IF_ERROR(kernels::Linear(x, tokens, dim_, fc1_, 2 * hidden_, {},
                                        absl::MakeSpan(u)));
  TWICE_RETURN_IF_ERROR(kernels::SwiGlu(u, tokens, hidden_, absl::MakeSpan(a)));
  return kernels::Linear(a, tokens, hidden_, fc2_, dim_, {}, out);
}

}  // namespace twice::engine
