#include "engine/layers/rat_swa_attention.h"

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

absl::StatusOr<std::unique_ptr<RatSwaAttention>> RatSwaAttention::Load(
    const WeightMap& weights, const std::string& prefix,
    const RatSwaOptions& o) {
  if (o.dim < 2 || o.heads < 1 || o.dim % o.heads != 0 ||
      (o.dim / o.heads) % 2 != 0 || o.window < 1) {
    return absl::InvalidArgumentError(
        "RatSwaAttention: heads must split D into even head dimensions and "
        "the window hold at least one token");
  }
  std::unique_ptr<RatSwaAttention> m(new RatSwaAttention());
  m->options_ = o;
  m->head_dim_ = o.dim / o.heads;
  const std::string p = prefix + "seq_layer.";
  TWICE_ASSIGN_OR_RETURN(
      m->in_proj_, weights.GetMatrix(p + "in_proj.weight", {3 * o.dim, o.dim}));
  TWICE_ASSIGN_OR_RETURN(
      m->out_proj_, weights.GetMatrix(p + "out_proj.weight", {o.dim, o.dim}));
  return m;
}

std::unique_ptr<LayerState> RatSwaAttention::NewState() const {
  return std::make_unique<WindowKvState>(options_.window, options_.heads,
                                         head_dim_);
}

absl::Status RatSwaAttention::ValidateState(LayerState& state,
                                            int64_t start_pos) const {
  return CheckState(state, start_pos).status();
}

absl::StatusOr<WindowKvState*> RatSwaAttention::CheckState(
    LayerState& state, int64_t start_pos) const {
  const RatSwaOptions& o = options_;
  auto* ring = dynamic_cast<WindowKvState*>(&state);
  if (ring == nullptr || ring->capacity() != o.window ||
      ring->heads() != o.heads || ring->head_dim() != head_dim_) {
    return absl::FailedPreconditionError(
        "RatSwaAttention: layer state is not a matching sliding_window state");
  }
  if (ring->count() != start_pos) {
    return absl::FailedPreconditionError(
        absl::StrCat("RatSwaAttention: window state has read ", ring->count(),
                     " tokens but the sequence has read ", start_pos));
  }
  return ring;
}

absl::Status RatSwaAttention::Forward(absl::Span<const float> x, int64_t tokens,
                                      int64_t start_pos, LayerState& state,
                                      absl::Span<float> out) const {
  const RatSwaOptions& o = options_;
  TWICE_ASSIGN_OR_RETURN(WindowKvState * ring, CheckState(state, start_pos));
  const int64_t d = o.dim, cap = o.window;
  std::vector<float> vqk(tokens * 3 * d);  // [T, 3D] = v | q | k
  TWICE_RETURN_IF_ERROR(
      kernels::Linear(x, tokens, d, in_proj_, 3 * d, {}, absl::MakeSpan(vqk)));
  auto all = absl::MakeSpan(vqk);
  TWICE_RETURN_IF_ERROR(kernels::RopeRotateHalf(all.subspan(d), tokens, 3 * d,
                                                o.heads, head_dim_, start_pos,
                                                o.rope_base));
  TWICE_RETURN_IF_ERROR(kernels::RopeRotateHalf(all.subspan(2 * d), tokens,
                                                3 * d, o.heads, head_dim_,
                                                start_pos, o.rope_base));
  // Context: cached keys still in the window (oldest first), then the new.
  const int64_t past = std::min(ring->count(), cap);
  std::vector<float> ctx_k((past + tokens) * d), ctx_v((past + tokens) * d);
  for (int64_t j = 0; j < past; ++j) {
    const int64_t slot = (ring->count() - past + j) % cap;
    std::copy(ring->key(slot), ring->key(slot) + d, ctx_k.begin() + j * d);
    std::copy(ring->value(slot), ring->value(slot) + d, ctx_v.begin() + j * d);
  }
  for (int64_t i = 0; i < tokens; ++i) {
    const float* row = vqk.data() + i * 3 * d;
    std::copy(row + 2 * d, row + 3 * d, ctx_k.begin() + (past + i) * d);
    std::copy(row, row + d, ctx_v.begin() + (past + i) * d);
  }
  std::vector<float> y(tokens * d);
  const kernels::WindowAttentionDims dims{tokens, past, o.heads, head_dim_,
                                          cap};
  TWICE_RETURN_IF_ERROR(kernels::WindowAttention(
      all.subspan(d), 3 * d, ctx_k, ctx_v, dims,
      1.0f / std::sqrt(static_cast<float>(head_dim_)), absl::MakeSpan(y)));
  for (int64_t i = std::max<int64_t>(0, tokens - cap); i < tokens; ++i) {
    const int64_t slot = (start_pos + i) % cap;
    const float* row = vqk.data() + i * 3 * d;
    std::copy(row + 2 * d, row + 3 * d, ring->key(slot));
    std::copy(row, row + d, ring->value(slot));
  }
  ring->set_count(start_pos + tokens);
  return kernels::Linear(y, tokens, d, out_proj_, d, {}, out);
}

}  // namespace twice::engine
