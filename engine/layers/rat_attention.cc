#include "engine/layers/rat_attention.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "kernels/linear.h"
#include "kernels/rat_chunk_attention.h"
#include "kernels/rope.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

absl::StatusOr<std::unique_ptr<RatAttention>> RatAttention::Load(
    const WeightMap& weights, const std::string& prefix,
    const RatAttentionOptions& o) {
  if (o.dim < 2 || o.heads < 1 || o.dim % o.heads != 0 ||
      (o.dim / o.heads) % 2 != 0 || o.groups < 1 || o.heads % o.groups != 0 ||
      o.chunk_size < 1) {
    return absl::InvalidArgumentError(
        "RatAttention: heads must split D into even head dimensions, groups "
        "divide heads and chunks hold at least one token");
  }
  std::unique_ptr<RatAttention> m(new RatAttention());
  m->options_ = o;
  m->head_dim_ = o.dim / o.heads;
  const int64_t rows = 3 * o.dim + 2 * o.groups * m->head_dim_;
  const std::string p = prefix + "seq_layer.";
  TWICE_ASSIGN_OR_RETURN(
      m->in_proj_, weights.GetMatrix(p + "in_proj.weight", {rows, o.dim}));
  TWICE_ASSIGN_OR_RETURN(m->gate_bias_, weights.Get(p + "gate_bias", {o.dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->out_proj_, weights.GetMatrix(p + "out_proj.weight", {o.dim, o.dim}));
  return m;
}

std::unique_ptr<LayerState> RatAttention::NewState() const {
  return std::make_unique<RatChunkKvState>(options_.chunk_size, options_.dim);
}

absl::Status RatAttention::ValidateState(LayerState& state,
                                         int64_t start_pos) const {
  return CheckState(state, start_pos).status();
}

absl::StatusOr<RatChunkKvState*> RatAttention::CheckState(
    LayerState& state, int64_t start_pos) const {
  auto* st = dynamic_cast<RatChunkKvState*>(&state);
  const RatAttentionOptions& o = options_;
  if (st == nullptr || st->dim() != o.dim || st->chunk_size() != o.chunk_size) {
    return absl::FailedPreconditionError(
        "RatAttention: layer state is not a matching rat_chunk_kv state");
  }
  if (st->count() != start_pos) {
    return absl::FailedPreconditionError(
        absl::StrCat("RatAttention: chunk state has read ", st->count(),
                     " tokens but the sequence has read ", start_pos));
  }
  return st;
}

absl::Status RatAttention::Forward(absl::Span<const float> x, int64_t tokens,
                                   int64_t start_pos, LayerState& state,
                                   absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(RatChunkKvState * st, CheckState(state, start_pos));
  const int64_t d = options_.dim;
  const int64_t w = 3 * d + 2 * options_.groups * head_dim_;
  std::vector<float> proj(tokens * w);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, in_proj_, w, {}, absl::MakeSpan(proj)));
  std::vector<float> y(tokens * d);
  TWICE_RETURN_IF_ERROR(
      Mix(proj.data(), tokens, start_pos, *st, absl::MakeSpan(y)));
  return kernels::Linear(y, tokens, d, out_proj_, d, {}, out);
}

absl::Status RatAttention::StepBatch(absl::Span<const float> x,
                                     absl::Span<LayerState* const> states,
                                     absl::Span<const int64_t> positions,
                                     absl::Span<float> out) const {
  const int64_t rows = static_cast<int64_t>(states.size());
  if (positions.size() != states.size()) {
    return absl::InvalidArgumentError(
        "RatAttention::StepBatch: one position per state");
  }
  std::vector<RatChunkKvState*> sts(rows);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_ASSIGN_OR_RETURN(sts[b], CheckState(*states[b], positions[b]));
  }
  const int64_t d = options_.dim;
  const int64_t w = 3 * d + 2 * options_.groups * head_dim_;
  std::vector<float> proj(rows * w);
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, d, in_proj_, w, {}, absl::MakeSpan(proj)));
  std::vector<float> y(rows * d);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(Mix(proj.data() + b * w, 1, positions[b], *sts[b],
                              absl::MakeSpan(y).subspan(b * d, d)));
  }
  return kernels::Linear(y, rows, d, out_proj_, d, {}, out);
}

absl::Status RatAttention::Mix(const float* proj_rows, int64_t tokens,
                               int64_t start_pos, RatChunkKvState& state,
                               absl::Span<float> y) const {
  const RatAttentionOptions& o = options_;
  RatChunkKvState* st = &state;
  const int64_t d = o.dim, hd = head_dim_, l_len = o.chunk_size;
  const int64_t qk = o.groups * hd;
  const int64_t w = 3 * d + 2 * qk;
  // Per token: q (rotated), own k̄ (rotated), own v̄, z; [T, D] each.
  std::vector<float> q(tokens * d), own_k(tokens * d), own_v(tokens * d),
      z(tokens * d);
  std::vector<int64_t> visible(tokens);
  const float* bias = gate_bias_.data();
  float* rk = st->open_key();
  float* rv = st->open_value();
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t pos = start_pos + i;
    const int64_t chunk = pos / l_len;
    const bool first = pos % l_len == 0;
    const float* row = proj_rows + i * w;
    const float* zt = row;
    const float* v = row + d;
    const float* gt = row + 2 * d;
    const float* qt = row + 3 * d;
    const float* kt = row + 3 * d + qk;
    float* qi = q.data() + i * d;
    float* ki = own_k.data() + i * d;
    for (int64_t j = 0; j < d; ++j) {
      const float g = Sigmoid(gt[j] + bias[j]);
      const float k = kt[j % qk];  // tiled groups
      rk[j] = first ? (1.0f - g) * k : g * rk[j] + (1.0f - g) * k;
      rv[j] = first ? (1.0f - g) * v[j] : g * rv[j] + (1.0f - g) * v[j];
      qi[j] = qt[j % qk];
      z[i * d + j] = Sigmoid(zt[j]);
    }
    std::copy(rk, rk + d, ki);
    std::copy(rv, rv + d, own_v.begin() + i * d);
    TWICE_RETURN_IF_ERROR(kernels::RopeRotateHalf(
        absl::MakeSpan(qi, d), 1, d, o.heads, hd, chunk, o.rope_base));
    TWICE_RETURN_IF_ERROR(kernels::RopeRotateHalf(
        absl::MakeSpan(ki, d), 1, d, o.heads, hd, chunk, o.rope_base));
    visible[i] = chunk;
    if (pos % l_len == l_len - 1) st->CloseChunk(ki, rv);
  }
  st->set_count(start_pos + tokens);

  const absl::Span<const float> closed = st->closed();
  const kernels::RatAttentionDims dims{tokens, st->closed_chunks(), o.heads,
                                       hd};
  TWICE_RETURN_IF_ERROR(kernels::RatChunkAttention(
      {q, d}, {own_k, d}, {own_v, d}, {closed, 2 * d},
      {closed.subspan(closed.empty() ? 0 : d), 2 * d}, visible, dims,
      1.0f / std::sqrt(static_cast<float>(hd)), y));
  for (int64_t i = 0; i < tokens * d; ++i) y[i] *= z[i];
  return absl::OkStatus();
}

}  // namespace twice::engine
