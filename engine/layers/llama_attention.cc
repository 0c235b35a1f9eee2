#include "engine/layers/llama_attention.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layers/full_kv_state.h"
#include "kernels/attention_decode.h"
#include "kernels/linear.h"
#include "kernels/rope.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<LlamaAttention>> LlamaAttention::Load(
    const WeightMap& weights, const std::string& module,
    const LlamaAttentionOptions& o) {
  if (o.dim < 1 || o.heads < 1 || o.kv_heads < 1 || o.heads % o.kv_heads != 0 ||
      o.head_dim < 1 || (o.rotary && o.head_dim % 2 != 0)) {
    return absl::InvalidArgumentError(
        "LlamaAttention: H_kv must divide H and the head dimension be even "
        "with rotary embeddings");
  }
  std::unique_ptr<LlamaAttention> m(new LlamaAttention());
  m->options_ = o;
  const int64_t qw = o.heads * o.head_dim, kvw = o.kv_heads * o.head_dim;
  const std::string& p = module;
  TWICE_ASSIGN_OR_RETURN(m->wq_,
                         weights.GetMatrix(p + "q_proj.weight", {qw, o.dim}));
  TWICE_ASSIGN_OR_RETURN(m->wk_,
                         weights.GetMatrix(p + "k_proj.weight", {kvw, o.dim}));
  TWICE_ASSIGN_OR_RETURN(m->wv_,
                         weights.GetMatrix(p + "v_proj.weight", {kvw, o.dim}));
  TWICE_ASSIGN_OR_RETURN(m->wo_,
                         weights.GetMatrix(p + "o_proj.weight", {o.dim, qw}));
  return m;
}

std::unique_ptr<LayerState> LlamaAttention::NewState() const {
  return std::make_unique<FullKvState>(options_.kv_heads, options_.head_dim);
}

absl::Status LlamaAttention::ValidateState(LayerState& state,
                                           int64_t start_pos) const {
  return CheckState(state, start_pos).status();
}

absl::StatusOr<FullKvState*> LlamaAttention::CheckState(
    LayerState& state, int64_t start_pos) const {
  auto* kv = dynamic_cast<FullKvState*>(&state);
  if (kv == nullptr || kv->kv_heads() != options_.kv_heads ||
      kv->head_dim() != options_.head_dim) {
    return absl::FailedPreconditionError(
        "LlamaAttention: layer state is not a matching full_kv state");
  }
  if (kv->count() != start_pos) {
    return absl::FailedPreconditionError(
        absl::StrCat("LlamaAttention: KV cache holds ", kv->count(),
                     " tokens but the sequence has read ", start_pos));
  }
  return kv;
}

absl::Status LlamaAttention::Project(absl::Span<const float> x, int64_t rows,
                                     std::vector<float>& q,
                                     std::vector<float>& k,
                                     std::vector<float>& v) const {
  const LlamaAttentionOptions& o = options_;
  const int64_t qw = o.heads * o.head_dim, kvw = o.kv_heads * o.head_dim;
  q.resize(rows * qw);
  k.resize(rows * kvw);
  v.resize(rows * kvw);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, o.dim, wq_, qw, {}, absl::MakeSpan(q)));
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, o.dim, wk_, kvw, {}, absl::MakeSpan(k)));
  return kernels::Linear(x, rows, o.dim, wv_, kvw, {}, absl::MakeSpan(v));
}

absl::Status LlamaAttention::Attend(float* q, float* k, const float* v,
                                    int64_t tokens, int64_t start_pos,
                                    FullKvState& kv,
                                    absl::Span<float> y) const {
  const LlamaAttentionOptions& o = options_;
  const int64_t hd = o.head_dim;
  const int64_t qw = o.heads * hd, kvw = o.kv_heads * hd;
  if (o.rotary) {
    TWICE_RETURN_IF_ERROR(
        kernels::RopeRotateHalf(absl::MakeSpan(q, tokens * qw), tokens, qw,
                                o.heads, hd, start_pos, o.rope_theta));
    TWICE_RETURN_IF_ERROR(
        kernels::RopeRotateHalf(absl::MakeSpan(k, tokens * kvw), tokens, kvw,
                                o.kv_heads, hd, start_pos, o.rope_theta));
  }
  kv.Append(k, v, tokens, kvw);
  const kernels::CausalAttentionDims dims{tokens, start_pos, o.heads,
                                          o.kv_heads, hd};
  return kernels::CausalGqaAttention(
      absl::MakeConstSpan(q, tokens * qw), qw, kv.keys(), kv.values(), dims,
      o.scale > 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(hd)), y);
}

absl::Status LlamaAttention::Forward(absl::Span<const float> x, int64_t tokens,
                                     int64_t start_pos, LayerState& state,
                                     absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(FullKvState * kv, CheckState(state, start_pos));
  const int64_t qw = options_.heads * options_.head_dim;
  std::vector<float> q, k, v;
  TWICE_RETURN_IF_ERROR(Project(x, tokens, q, k, v));
  std::vector<float> y(tokens * qw);
  TWICE_RETURN_IF_ERROR(Attend(q.data(), k.data(), v.data(), tokens, start_pos,
                               *kv, absl::MakeSpan(y)));
  return kernels::Linear(y, tokens, qw, wo_, options_.dim, {}, out);
}

absl::Status LlamaAttention::StepBatch(absl::Span<const float> x,
                                       absl::Span<LayerState* const> states,
                                       absl::Span<const int64_t> positions,
                                       absl::Span<float> out) const {
  const int64_t rows = static_cast<int64_t>(states.size());
  if (positions.size() != states.size()) {
    return absl::InvalidArgumentError(
        "LlamaAttention::StepBatch: one position per state");
  }
  std::vector<FullKvState*> kvs(rows);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_ASSIGN_OR_RETURN(kvs[b], CheckState(*states[b], positions[b]));
  }
  const int64_t qw = options_.heads * options_.head_dim;
  const int64_t kvw = options_.kv_heads * options_.head_dim;
  std::vector<float> q, k, v;
  TWICE_RETURN_IF_ERROR(Project(x, rows, q, k, v));
  std::vector<float> y(rows * qw);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(Attend(q.data() + b * qw, k.data() + b * kvw,
                                 v.data() + b * kvw, 1, positions[b], *kvs[b],
                                 absl::MakeSpan(y).subspan(b * qw, qw)));
  }
  return kernels::Linear(y, rows, qw, wo_, options_.dim, {}, out);
}

}  // namespace twice::engine
