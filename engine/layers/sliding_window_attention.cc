#include "engine/layers/sliding_window_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layers/window_kv_state.h"
#include "kernels/linear.h"
#include "kernels/rope.h"
#include "kernels/status_macros.h"
#include "kernels/window_attention.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<SlidingWindowAttention>>
SlidingWindowAttention::Load(const WeightMap& weights,
                             const std::string& prefix,
                             const SlidingWindowOptions& options) {
  if (options.dim < 1 || options.heads < 1 ||
      options.dim % options.heads != 0 ||
      (options.dim / options.heads) % 2 != 0 || options.window < 1) {
    return absl::InvalidArgumentError(
        "SlidingWindowAttention: heads must split the width into even head "
        "dimensions and the window must hold at least one token");
  }
  std::unique_ptr<SlidingWindowAttention> m(new SlidingWindowAttention());
  m->options_ = options;
  m->head_dim_ = options.dim / options.heads;
  const int64_t d = options.dim;
  const std::string p = prefix + "mixer.";
  TWICE_ASSIGN_OR_RETURN(m->wqkv_,
                         weights.GetMatrix(p + "Wqkv.weight", {3 * d, d}));
  TWICE_ASSIGN_OR_RETURN(m->wo_,
                         weights.GetMatrix(p + "out_proj.weight", {d, d}));
  return m;
}

std::unique_ptr<LayerState> SlidingWindowAttention::NewState() const {
  return std::make_unique<WindowKvState>(options_.window, options_.heads,
                                         head_dim_);
}

absl::Status SlidingWindowAttention::ValidateState(LayerState& state,
                                                   int64_t start_pos) const {
  return CheckState(state, start_pos).status();
}

absl::StatusOr<WindowKvState*> SlidingWindowAttention::CheckState(
    LayerState& state, int64_t start_pos) const {
  auto* ring = dynamic_cast<WindowKvState*>(&state);
  if (ring == nullptr || ring->capacity() != options_.window ||
      ring->heads() != options_.heads || ring->head_dim() != head_dim_) {
    return absl::FailedPreconditionError(
        "SlidingWindowAttention: layer state is not a matching sliding_window "
        "state");
  }
  if (ring->count() != start_pos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SlidingWindowAttention: window state has read ", ring->count(),
        " tokens but the sequence has read ", start_pos));
  }
  return ring;
}

absl::Status SlidingWindowAttention::Forward(absl::Span<const float> x,
                                             int64_t tokens, int64_t start_pos,
                                             LayerState& state,
                                             absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(WindowKvState * ring, CheckState(state, start_pos));
  const int64_t d = options_.dim;
  std::vector<float> qkv(tokens * 3 * d);  // [T, 3d] = q | k | v
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, wqkv_, 3 * d, {}, absl::MakeSpan(qkv)));
  std::vector<float> y(tokens * d);
  TWICE_RETURN_IF_ERROR(
      Attend(absl::MakeSpan(qkv), tokens, start_pos, *ring, absl::MakeSpan(y)));
  return kernels::Linear(y, tokens, d, wo_, d, {}, out);
}

absl::Status SlidingWindowAttention::StepBatch(
    absl::Span<const float> x, absl::Span<LayerState* const> states,
    absl::Span<const int64_t> positions, absl::Span<float> out) const {
  const int64_t rows = static_cast<int64_t>(states.size());
  if (positions.size() != states.size()) {
    return absl::InvalidArgumentError(
        "SlidingWindowAttention::StepBatch: one position per state");
  }
  std::vector<WindowKvState*> rings(states.size());
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_ASSIGN_OR_RETURN(rings[b], CheckState(*states[b], positions[b]));
  }
  const int64_t d = options_.dim;
  std::vector<float> qkv(rows * 3 * d);  // [B, 3d]
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, rows, d, wqkv_, 3 * d, {}, absl::MakeSpan(qkv)));
  std::vector<float> y(rows * d);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(Attend(absl::MakeSpan(qkv).subspan(b * 3 * d, 3 * d),
                                 1, positions[b], *rings[b],
                                 absl::MakeSpan(y).subspan(b * d, d)));
  }
  return kernels::Linear(y, rows, d, wo_, d, {}, out);
}

absl::Status SlidingWindowAttention::Attend(absl::Span<float> qkv,
                                            int64_t tokens, int64_t start_pos,
                                            WindowKvState& state,
                                            absl::Span<float> y) const {
  WindowKvState* ring = &state;
  const int64_t d = options_.dim;
  const int64_t h = options_.heads;
  const int64_t cap = options_.window;
  TWICE_RETURN_IF_ERROR(kernels::RopeRotateHalf(
      qkv, tokens, 3 * d, h, head_dim_, start_pos, options_.rotary_base));
  TWICE_RETURN_IF_ERROR(kernels::RopeRotateHalf(qkv.subspan(d), tokens, 3 * d,
                                                h, head_dim_, start_pos,
                                                options_.rotary_base));

  // Context = the cached tokens still inside the window, oldest first, then
  // the new ones: [P + T, d] keys and values.
  const int64_t past = std::min(ring->count(), cap);
  std::vector<float> ctx_k((past + tokens) * d), ctx_v((past + tokens) * d);
  for (int64_t j = 0; j < past; ++j) {
    const int64_t slot = (ring->count() - past + j) % cap;
    std::copy(ring->key(slot), ring->key(slot) + d, ctx_k.begin() + j * d);
    std::copy(ring->value(slot), ring->value(slot) + d, ctx_v.begin() + j * d);
  }
  for (int64_t i = 0; i < tokens; ++i) {
    const float* row = qkv.data() + i * 3 * d;
    std::copy(row + d, row + 2 * d, ctx_k.begin() + (past + i) * d);
    std::copy(row + 2 * d, row + 3 * d, ctx_v.begin() + (past + i) * d);
  }

  const kernels::WindowAttentionDims dims{tokens, past, h, head_dim_, cap};
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  TWICE_RETURN_IF_ERROR(
      kernels::WindowAttention(qkv, 3 * d, ctx_k, ctx_v, dims, scale, y));

  // Only the last `cap` new tokens can still be seen by later queries.
  for (int64_t i = std::max<int64_t>(0, tokens - cap); i < tokens; ++i) {
    const int64_t slot = (start_pos + i) % cap;
    const float* row = qkv.data() + i * 3 * d;
    std::copy(row + d, row + 2 * d, ring->key(slot));
    std::copy(row + 2 * d, row + 3 * d, ring->value(slot));
  }
  ring->set_count(start_pos + tokens);
  return absl::OkStatus();
}

}  // namespace twice::engine
