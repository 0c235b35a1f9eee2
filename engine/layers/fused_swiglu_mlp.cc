#include "engine/layers/fused_swiglu_mlp.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/activations.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<FusedSwiGluMlp>> FusedSwiGluMlp::Load(
    const WeightMap& weights, const std::string& module, int64_t dim,
    int64_t hidden) {
  TWICE_ASSIGN_OR_RETURN(
      Tensor input,
      weights.GetMatrix(module + "input_linear.weight", {2 * hidden, dim}));
  TWICE_ASSIGN_OR_RETURN(
      Tensor output,
      weights.GetMatrix(module + "output_linear.weight", {dim, hidden}));
  return FromMatrices(std::move(input), std::move(output), dim, hidden);
}

absl::StatusOr<std::unique_ptr<FusedSwiGluMlp>> FusedSwiGluMlp::FromMatrices(
    Tensor input, Tensor output, int64_t dim, int64_t hidden) {
  if (input.shape() != Shape{2 * hidden, dim} ||
      output.shape() != Shape{dim, hidden}) {
    return absl::InvalidArgumentError(
        absl::StrCat("FusedSwiGluMlp: input ", ShapeToString(input.shape()),
                     " and output ", ShapeToString(output.shape()), " for dim ",
                     dim, " and hidden ", hidden));
  }
  auto m = std::make_unique<FusedSwiGluMlp>();
  m->input_ = std::move(input);
  m->output_ = std::move(output);
  m->dim_ = dim;
  m->hidden_ = hidden;
  return m;
}

absl::Status FusedSwiGluMlp::Forward(absl::Span<const float> x, int64_t tokens,
                                     absl::Span<float> out) const {
  const int64_t two = 2 * hidden_;
  std::vector<float> u(tokens * two), a(tokens * hidden_);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, dim_, input_, two, {}, absl::MakeSpan(u)));
  const absl::Span<const float> view = u;
  TWICE_RETURN_IF_ERROR(kernels::SiluMul(view, two, view.subspan(hidden_), two,
                                         tokens, hidden_, absl::MakeSpan(a)));
  return kernels::Linear(a, tokens, hidden_, output_, dim_, {}, out);
}

}  // namespace twice::engine
