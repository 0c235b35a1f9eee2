#include "engine/layers/based_linear_attention.h"

#include <vector>

#include "engine/layers/linear_attention_state.h"
#include "kernels/linear.h"
#include "kernels/linear_attention.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<BasedLinearAttention>>
BasedLinearAttention::Load(const WeightMap& weights, const std::string& prefix,
                           const LinearAttentionOptions& options) {
  if (options.dim < 1 || options.heads < 1 ||
      options.dim % options.heads != 0 || options.feature_dim < 1) {
    return absl::InvalidArgumentError(
        "BasedLinearAttention: heads must divide the model width");
  }
  std::unique_ptr<BasedLinearAttention> m(new BasedLinearAttention());
  m->options_ = options;
  m->head_dim_ = options.dim / options.heads;
  m->feature_size_ = kernels::TaylorFeatureDim(options.feature_dim);
  const int64_t d = options.dim;
  const int64_t qk = options.heads * options.feature_dim;
  const std::string p = prefix + "mixer.";
  TWICE_ASSIGN_OR_RETURN(m->wq_, weights.Get(p + "proj_q.weight", {qk, d}));
  TWICE_ASSIGN_OR_RETURN(m->wk_, weights.Get(p + "proj_k.weight", {qk, d}));
  TWICE_ASSIGN_OR_RETURN(m->wv_, weights.Get(p + "proj_v.weight", {d, d}));
  TWICE_ASSIGN_OR_RETURN(m->wo_, weights.Get(p + "out_proj.weight", {d, d}));
  return m;
}

std::unique_ptr<LayerState> BasedLinearAttention::NewState() const {
  return std::make_unique<LinearAttentionState>(options_.heads, head_dim_,
                                                feature_size_);
}

absl::Status BasedLinearAttention::Forward(absl::Span<const float> x,
                                           int64_t tokens, int64_t start_pos,
                                           LayerState& state,
                                           absl::Span<float> out) const {
  auto* la = dynamic_cast<LinearAttentionState*>(&state);
  if (la == nullptr || la->heads() != options_.heads ||
      la->head_dim() != head_dim_ || la->feature_size() != feature_size_) {
    return absl::FailedPreconditionError(
        "BasedLinearAttention: layer state is not a matching linear_attention "
        "state");
  }
  const int64_t d = options_.dim;
  const int64_t h = options_.heads;
  const int64_t f = options_.feature_dim;
  std::vector<float> q(tokens * h * f), k(tokens * h * f), v(tokens * d);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, wq_.span(), h * f, {}, absl::MakeSpan(q)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, wk_.span(), h * f, {}, absl::MakeSpan(k)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, wv_.span(), d, {}, absl::MakeSpan(v)));
  // [T, H, F] -> [T, H, D]: the map works on T·H independent vectors.
  std::vector<float> phi_q(tokens * h * feature_size_);
  std::vector<float> phi_k(tokens * h * feature_size_);
  TWICE_RETURN_IF_ERROR(
      kernels::TaylorFeatureMap(q, tokens * h, f, absl::MakeSpan(phi_q)));
  TWICE_RETURN_IF_ERROR(
      kernels::TaylorFeatureMap(k, tokens * h, f, absl::MakeSpan(phi_k)));
  std::vector<float> y(tokens * d);  // [T, H, hd]
  const kernels::LinearAttentionDims dims{h, head_dim_, feature_size_};
  if (tokens == 1) {
    TWICE_RETURN_IF_ERROR(
        kernels::LinearAttentionStep(phi_q, phi_k, v, dims, options_.eps,
                                     la->kv(), la->k_sum(), absl::MakeSpan(y)));
  } else {
    TWICE_RETURN_IF_ERROR(kernels::LinearAttentionPrefill(
        phi_q, phi_k, v, tokens, dims, options_.eps, la->kv(), la->k_sum(),
        absl::MakeSpan(y)));
  }
  return kernels::Linear(y, tokens, d, wo_.span(), d, {}, out);
}

}  // namespace twice::engine
