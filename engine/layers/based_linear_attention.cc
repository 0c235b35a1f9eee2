#include "engine/layers/based_linear_attention.h"

#include <utility>
#include <vector>

#include "engine/layers/linear_attention_state.h"
#include "kernels/linear.h"
#include "kernels/linear_attention.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"
#include "kernels/taylor_linear_attention.h"

namespace twice::engine {

absl::StatusOr<LinearAttentionCore> LinearAttentionCore::Load(
    const WeightMap& weights, const std::string& prefix,
    const LinearAttentionOptions& options, std::string_view mixer) {
  if (options.dim < 1 || options.heads < 1 ||
      options.dim % options.heads != 0 || options.feature_dim < 1) {
    return absl::InvalidArgumentError(std::string(mixer) +
                                      ": heads must divide the model width");
  }
  LinearAttentionCore core;
  core.mixer = std::string(mixer);
  core.options = options;
  core.head_dim = options.dim / options.heads;
  core.feature_size = kernels::TaylorFeatureDim(options.feature_dim);
  const int64_t d = options.dim;
  const int64_t qk = options.heads * options.feature_dim;
  const std::string p = prefix + "mixer.";
  TWICE_ASSIGN_OR_RETURN(core.wq,
                         weights.GetMatrix(p + "proj_q.weight", {qk, d}));
  TWICE_ASSIGN_OR_RETURN(core.wk,
                         weights.GetMatrix(p + "proj_k.weight", {qk, d}));
  TWICE_ASSIGN_OR_RETURN(core.wv,
                         weights.GetMatrix(p + "proj_v.weight", {d, d}));
  TWICE_ASSIGN_OR_RETURN(core.wo,
                         weights.GetMatrix(p + "out_proj.weight", {d, d}));
  return core;
}

std::unique_ptr<LayerState> LinearAttentionCore::NewState() const {
  return std::make_unique<LinearAttentionState>(options.heads, head_dim,
                                                feature_size);
}

absl::StatusOr<LinearAttentionState*> LinearAttentionCore::Check(
    LayerState& state) const {
  auto* la = dynamic_cast<LinearAttentionState*>(&state);
  if (la == nullptr || la->heads() != options.heads ||
      la->head_dim() != head_dim || la->feature_size() != feature_size) {
    return absl::FailedPreconditionError(mixer +
                                         ": layer state is not a matching "
                                         "linear_attention state");
  }
  return la;
}

absl::StatusOr<std::unique_ptr<BasedLinearAttention>>
BasedLinearAttention::Load(const WeightMap& weights, const std::string& prefix,
                           const LinearAttentionOptions& options) {
  TWICE_ASSIGN_OR_RETURN(LinearAttentionCore core,
                         LinearAttentionCore::Load(weights, prefix, options,
                                                   "BasedLinearAttention"));
  std::unique_ptr<BasedLinearAttention> m(new BasedLinearAttention());
  m->core_ = std::move(core);
  return m;
}

std::unique_ptr<LayerState> BasedLinearAttention::NewState() const {
  return core_.NewState();
}

absl::Status BasedLinearAttention::ValidateState(LayerState& state,
                                                 int64_t start_pos) const {
  return core_.Check(state).status();
}

absl::Status BasedLinearAttention::Forward(absl::Span<const float> x,
                                           int64_t tokens, int64_t start_pos,
                                           LayerState& state,
                                           absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(LinearAttentionState * la, core_.Check(state));
  const int64_t d = core_.options.dim;
  const int64_t h = core_.options.heads;
  const int64_t f = core_.options.feature_dim;
  std::vector<float> q(tokens * h * f), k(tokens * h * f), v(tokens * d);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, core_.wq, h * f, {}, absl::MakeSpan(q)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, core_.wk, h * f, {}, absl::MakeSpan(k)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, core_.wv, d, {}, absl::MakeSpan(v)));
  std::vector<float> y(tokens * d);  // [T, H, hd]
  TWICE_RETURN_IF_ERROR(kernels::TaylorLinearAttention(
      q, k, v, tokens, {}, {}, /*encoder_tokens=*/0, core_.attention_dims(),
      core_.options.eps, la->kv(), la->k_sum(), absl::MakeSpan(y)));
  return kernels::Linear(y, tokens, d, core_.wo, d, {}, out);
}

absl::Status BasedLinearAttention::StepBatch(
    absl::Span<const float> x, absl::Span<LayerState* const> states,
    absl::Span<const int64_t> /*positions*/, absl::Span<float> out) const {
  std::vector<LinearAttentionState*> la(states.size());
  for (size_t b = 0; b < states.size(); ++b) {
    TWICE_ASSIGN_OR_RETURN(la[b], core_.Check(*states[b]));
  }
  return LinearAttentionStepBatch(
      x, core_.options, {&core_.wq, &core_.wk, &core_.wv, &core_.wo}, la, out);
}

absl::Status LinearAttentionStepBatch(
    absl::Span<const float> x, const LinearAttentionOptions& options,
    const LinearAttentionWeights& weights,
    absl::Span<LinearAttentionState* const> states, absl::Span<float> out) {
  const int64_t rows = static_cast<int64_t>(states.size());
  const int64_t d = options.dim;
  const int64_t h = options.heads;
  const int64_t f = options.feature_dim;
  const int64_t hd = d / h;
  const int64_t fs = kernels::TaylorFeatureDim(f);
  std::vector<float> q(rows * h * f), k(rows * h * f), v(rows * d);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, d, *weights.wq, h * f, {}, absl::MakeSpan(q)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, d, *weights.wk, h * f, {}, absl::MakeSpan(k)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, d, *weights.wv, d, {}, absl::MakeSpan(v)));
  std::vector<float> phi_q(rows * h * fs), phi_k(rows * h * fs);
  TWICE_RETURN_IF_ERROR(
      kernels::TaylorFeatureMap(q, rows * h, f, absl::MakeSpan(phi_q)));
  TWICE_RETURN_IF_ERROR(
      kernels::TaylorFeatureMap(k, rows * h, f, absl::MakeSpan(phi_k)));
  std::vector<float> y(rows * d);  // [B, H, hd]
  const kernels::LinearAttentionDims dims{h, hd, fs};
  const absl::Span<const float> pq = phi_q, pk = phi_k, pv = v;
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(kernels::LinearAttentionStep(
        pq.subspan(b * h * fs, h * fs), pk.subspan(b * h * fs, h * fs),
        pv.subspan(b * d, d), dims, options.eps, states[b]->kv(),
        states[b]->k_sum(), absl::MakeSpan(y).subspan(b * d, d)));
  }
  return kernels::Linear(y, rows, d, *weights.wo, d, {}, out);
}

}  // namespace twice::engine
