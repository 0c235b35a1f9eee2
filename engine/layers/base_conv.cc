#include "engine/layers/base_conv.h"

#include <vector>

#include "engine/layers/short_conv_state.h"
#include "kernels/activations.h"
#include "kernels/causal_conv1d.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<BaseConv>> BaseConv::Load(
    const WeightMap& weights, const std::string& prefix, int64_t dim,
    int64_t inner, int64_t kernel_size) {
  std::unique_ptr<BaseConv> m(new BaseConv());
  const std::string p = prefix + "mixer.";
  TWICE_ASSIGN_OR_RETURN(
      m->in_proj_, weights.GetMatrix(p + "in_proj.weight", {2 * inner, dim}));
  TWICE_ASSIGN_OR_RETURN(m->in_bias_,
                         weights.Get(p + "in_proj.bias", {2 * inner}));
  TWICE_ASSIGN_OR_RETURN(
      m->out_proj_, weights.GetMatrix(p + "out_proj.weight", {dim, inner}));
  TWICE_ASSIGN_OR_RETURN(m->out_bias_, weights.Get(p + "out_proj.bias", {dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->conv_, weights.Get(p + "conv.conv.weight", {inner, 1, kernel_size}));
  m->dim_ = dim;
  m->inner_ = inner;
  m->kernel_size_ = kernel_size;
  return m;
}

std::unique_ptr<LayerState> BaseConv::NewState() const {
  return std::make_unique<ShortConvState>(kernel_size_, inner_);
}

absl::Status BaseConv::ValidateState(LayerState& state,
                                     int64_t start_pos) const {
  return CheckState(state).status();
}

absl::StatusOr<ShortConvState*> BaseConv::CheckState(LayerState& state) const {
  auto* conv_state = dynamic_cast<ShortConvState*>(&state);
  if (conv_state == nullptr || conv_state->channels() != inner_ ||
      conv_state->kernel_size() != kernel_size_) {
    return absl::FailedPreconditionError(
        "BaseConv: layer state is not a matching short_conv state");
  }
  return conv_state;
}

absl::Status BaseConv::Forward(absl::Span<const float> x, int64_t tokens,
                               int64_t start_pos, LayerState& state,
                               absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(ShortConvState * conv_state, CheckState(state));
  const int64_t c = inner_;
  std::vector<float> u(tokens * 2 * c);  // [T, 2C] = u1 | u2
  std::vector<float> conv(tokens * c);   // [T, C], then gated in place
  TWICE_RETURN_IF_ERROR(kernels::Linear(x, tokens, dim_, in_proj_, 2 * c,
                                        in_bias_.span(), absl::MakeSpan(u)));
  TWICE_RETURN_IF_ERROR(kernels::CausalConv1d(u, tokens, c, 2 * c, conv_.span(),
                                              kernel_size_, conv_state->tail(),
                                              absl::MakeSpan(conv)));
  TWICE_RETURN_IF_ERROR(
      kernels::SiluMul(conv, c, absl::MakeConstSpan(u).subspan(c), 2 * c,
                       tokens, c, absl::MakeSpan(conv)));
  return kernels::Linear(conv, tokens, c, out_proj_, dim_, out_bias_.span(),
                         out);
}

absl::Status BaseConv::StepBatch(absl::Span<const float> x,
                                 absl::Span<LayerState* const> states,
                                 absl::Span<const int64_t> /*positions*/,
                                 absl::Span<float> out) const {
  const int64_t rows = static_cast<int64_t>(states.size());
  const int64_t c = inner_;
  std::vector<ShortConvState*> conv_states(states.size());
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_ASSIGN_OR_RETURN(conv_states[b], CheckState(*states[b]));
  }
  std::vector<float> u(rows * 2 * c);  // [B, 2C] = u1 | u2
  std::vector<float> conv(rows * c);   // [B, C], then gated in place
  TWICE_RETURN_IF_ERROR(kernels::Linear(x, rows, dim_, in_proj_, 2 * c,
                                        in_bias_.span(), absl::MakeSpan(u)));
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(kernels::CausalConv1d(
        absl::MakeConstSpan(u).subspan(b * 2 * c, 2 * c), 1, c, 2 * c,
        conv_.span(), kernel_size_, conv_states[b]->tail(),
        absl::MakeSpan(conv).subspan(b * c, c)));
  }
  TWICE_RETURN_IF_ERROR(kernels::SiluMul(conv, c,
                                         absl::MakeConstSpan(u).subspan(c),
                                         2 * c, rows, c, absl::MakeSpan(conv)));
  return kernels::Linear(conv, rows, c, out_proj_, dim_, out_bias_.span(), out);
}

}  // namespace twice::engine
