#include "engine/layers/prefix_linear_attention.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_linear_attention.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<PrefixLinearAttention>>
PrefixLinearAttention::Load(const WeightMap& weights, const std::string& prefix,
                            const LinearAttentionOptions& options) {
  TWICE_ASSIGN_OR_RETURN(LinearAttentionCore core,
                         LinearAttentionCore::Load(weights, prefix, options,
                                                   "PrefixLinearAttention"));
  std::unique_ptr<PrefixLinearAttention> m(new PrefixLinearAttention());
  const int64_t d = options.dim;
  const int64_t qk = options.heads * options.feature_dim;
  const std::string p = prefix + "mixer.";
  TWICE_ASSIGN_OR_RETURN(m->wk_enc_,
                         weights.GetMatrix(p + "proj_k_enc.weight", {qk, d}));
  TWICE_ASSIGN_OR_RETURN(m->wv_enc_,
                         weights.GetMatrix(p + "proj_v_enc.weight", {d, d}));
  m->core_ = std::move(core);
  return m;
}

std::unique_ptr<LayerState> PrefixLinearAttention::NewState() const {
  return core_.NewState();
}

absl::Status PrefixLinearAttention::ValidateState(LayerState& state,
                                                  int64_t start_pos) const {
  return core_.Check(state).status();
}

absl::Status PrefixLinearAttention::KeysValues(
    absl::Span<const float> x, int64_t rows, int64_t masked, const Tensor& wk,
    const Tensor& wv, std::vector<float>& k, std::vector<float>& v) const {
  const int64_t d = core_.options.dim;
  const int64_t hf = core_.options.heads * core_.options.feature_dim;
  const absl::Span<const float> xr = x.subspan(0, rows * d);
  k.resize(rows * hf);
  v.resize(rows * d);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(xr, rows, d, wk, hf, {}, absl::MakeSpan(k)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(xr, rows, d, wv, d, {}, absl::MakeSpan(v)));
  // The released mask zeroes the raw 16-wide keys of pads; their values stay.
  std::fill(k.begin(), k.begin() + masked * hf, 0.0f);
  return absl::OkStatus();
}

absl::Status PrefixLinearAttention::Forward(absl::Span<const float> x,
                                            int64_t tokens,
                                            int64_t /*start_pos*/,
                                            LayerState& state,
                                            absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(LinearAttentionState * la, core_.Check(state));
  const int64_t d = core_.options.dim;
  const int64_t h = core_.options.heads;
  const int64_t f = core_.options.feature_dim;
  std::vector<float> q(tokens * h * f);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, core_.wq, h * f, {}, absl::MakeSpan(q)));
  std::vector<float> k, v;
  TWICE_RETURN_IF_ERROR(KeysValues(x, tokens, 0, core_.wk, core_.wv, k, v));
  std::vector<float> y(tokens * d);  // [T, H, hd]
  // After the prefix prefill the encoder lives in the state, so a causal
  // read is exactly Based's (linear attention has no positions).
  TWICE_RETURN_IF_ERROR(kernels::TaylorLinearAttention(
      q, k, v, tokens, {}, {}, /*encoder_tokens=*/0, core_.attention_dims(),
      core_.options.eps, la->kv(), la->k_sum(), absl::MakeSpan(y)));
  return kernels::Linear(y, tokens, d, core_.wo, d, {}, out);
}

absl::Status PrefixLinearAttention::StepBatch(
    absl::Span<const float> x, absl::Span<LayerState* const> states,
    absl::Span<const int64_t> /*positions*/, absl::Span<float> out) const {
  std::vector<LinearAttentionState*> la(states.size());
  for (size_t b = 0; b < states.size(); ++b) {
    TWICE_ASSIGN_OR_RETURN(la[b], core_.Check(*states[b]));
  }
  // JRT decode is Based decode: the encoder already lives in the state.
  return LinearAttentionStepBatch(
      x, core_.options, {&core_.wq, &core_.wk, &core_.wv, &core_.wo}, la, out);
}

absl::Status PrefixLinearAttention::ForwardPrefix(absl::Span<const float> x,
                                                  int64_t tokens,
                                                  const PrefixEncoding& prefix,
                                                  LayerState& state,
                                                  absl::Span<float> out) const {
  const int64_t e = prefix.encoder_tokens;
  const int64_t p = prefix.masked_tokens;
  if (!(0 <= p && p <= e && e <= tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PrefixLinearAttention: need 0 <= masked (", p,
                     ") <= encoder (", e, ") <= tokens (", tokens, ")"));
  }
  TWICE_ASSIGN_OR_RETURN(LinearAttentionState * la, core_.Check(state));
  const int64_t d = core_.options.dim;
  const int64_t h = core_.options.heads;
  const int64_t f = core_.options.feature_dim;
  std::vector<float> q(tokens * h * f);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, core_.wq, h * f, {}, absl::MakeSpan(q)));
  std::vector<float> kd, vd, ke, ve;
  TWICE_RETURN_IF_ERROR(KeysValues(x, tokens, p, core_.wk, core_.wv, kd, vd));
  TWICE_RETURN_IF_ERROR(KeysValues(x, e, p, wk_enc_, wv_enc_, ke, ve));
  std::vector<float> y(tokens * d);  // [T, H, hd]
  TWICE_RETURN_IF_ERROR(kernels::TaylorLinearAttention(
      q, kd, vd, tokens, ke, ve, e, core_.attention_dims(), core_.options.eps,
      la->kv(), la->k_sum(), absl::MakeSpan(y)));
  return kernels::Linear(y, tokens, d, core_.wo, d, {}, out);
}

}  // namespace twice::engine
