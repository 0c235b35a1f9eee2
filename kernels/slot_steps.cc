#include "kernels/slot_steps.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/causal_conv1d.h"
#include "kernels/check.h"
#include "kernels/linear_attention.h"
#include "kernels/rope.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_feature_map.h"
#include "kernels/window_attention.h"

namespace twice::kernels {
namespace {

// Distinct slots in [0, capacity).
absl::Status CheckSlots(const char* op, absl::Span<const int32_t> slots,
                        int64_t capacity) {
  std::vector<bool> seen(static_cast<size_t>(capacity), false);
  for (size_t r = 0; r < slots.size(); ++r) {
    const int32_t s = slots[r];
    if (s < 0 || s >= capacity) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": row ", r, " names slot ", s, " of ", capacity, " slots"));
    }
    if (seen[s]) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": slot ", s, " appears in two rows"));
    }
    seen[s] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckConvStepSlots(int64_t x_size, int64_t channels,
                                int64_t x_stride, int64_t weight_size,
                                int64_t kernel_size, int64_t tails_size,
                                absl::Span<const int32_t> slots,
                                int64_t out_size) {
  constexpr char kOp[] = "CausalConv1dStepSlots";
  TWICE_RETURN_IF_ERROR(
      CheckArg(channels >= 1 && kernel_size >= 2 && x_stride >= channels, kOp,
               "need channels >= 1, kernel_size >= 2, x_stride >= channels"));
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t per_slot = (kernel_size - 1) * channels;
  TWICE_RETURN_IF_ERROR(CheckArg(tails_size % per_slot == 0, kOp,
                                 "tails is not a whole number of slots"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "x", x_size, StridedExtent(rows, channels, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "weight", weight_size, channels * kernel_size));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out_size, rows * channels));
  return CheckSlots(kOp, slots, tails_size / per_slot);
}

absl::Status CheckSsdStepSlots(const SsdShape& shape, int64_t x_size,
                               int64_t x_stride, int64_t b_size, int64_t c_size,
                               int64_t bc_stride, int64_t dt_size,
                               int64_t a_size, int64_t d_size,
                               int64_t states_size,
                               absl::Span<const int32_t> slots,
                               int64_t y_size) {
  constexpr char kOp[] = "SsdStepSlots";
  TWICE_RETURN_IF_ERROR(CheckArg(
      shape.heads >= 1 && shape.head_dim >= 1 && shape.groups >= 1 &&
          shape.state >= 1 && shape.heads % shape.groups == 0,
      kOp,
      "need heads, head_dim, groups, state >= 1 and groups dividing heads"));
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  const int64_t per_slot = hp * shape.state;
  TWICE_RETURN_IF_ERROR(CheckArg(x_stride >= hp && bc_stride >= gn, kOp,
                                 "need x_stride >= H·P and bc_stride >= G·N"));
  TWICE_RETURN_IF_ERROR(CheckArg(states_size % per_slot == 0, kOp,
                                 "states is not a whole number of slots"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "x", x_size, StridedExtent(rows, hp, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "b", b_size, StridedExtent(rows, gn, bc_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "c", c_size, StridedExtent(rows, gn, bc_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "dt", dt_size, rows * shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "a", a_size, shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "d", d_size, shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y_size, rows * hp));
  return CheckSlots(kOp, slots, states_size / per_slot);
}

absl::Status CheckLinearAttentionStepSlots(
    const LinearAttentionStepDims& dims, int64_t q_size, int64_t k_size,
    int64_t v_size, int64_t kv_states_size, int64_t k_states_size,
    absl::Span<const int32_t> slots, int64_t y_size) {
  constexpr char kOp[] = "LinearAttentionStepSlots";
  TWICE_RETURN_IF_ERROR(
      CheckArg(dims.heads >= 1 && dims.head_dim >= 1 && dims.feature_dim >= 1,
               kOp, "need heads, head_dim, feature_dim >= 1"));
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t d = TaylorFeatureDim(dims.feature_dim);
  const int64_t per_slot = dims.heads * dims.head_dim * d;
  TWICE_RETURN_IF_ERROR(CheckArg(kv_states_size % per_slot == 0, kOp,
                                 "kv_states is not a whole number of slots"));
  const int64_t capacity = kv_states_size / per_slot;
  const int64_t qk_row = dims.heads * dims.feature_dim;
  const int64_t v_row = dims.heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "q", q_size, rows * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "k", k_size, rows * qk_row));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "v", v_size, rows * v_row));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "k_states", k_states_size, capacity * dims.heads * d));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y_size, rows * v_row));
  return CheckSlots(kOp, slots, capacity);
}

absl::Status CheckWindowAttentionStepSlots(
    const WindowStepDims& dims, int64_t qkv_size, int64_t qkv_stride,
    float rotary_base, absl::Span<const int64_t> positions, int64_t ring_k_size,
    int64_t ring_v_size, absl::Span<const int32_t> slots, int64_t y_size) {
  constexpr char kOp[] = "WindowAttentionStepSlots";
  TWICE_RETURN_IF_ERROR(
      CheckArg(dims.heads >= 1 && dims.head_dim >= 2 &&
                   dims.head_dim % 2 == 0 && dims.window >= 1,
               kOp, "need heads >= 1, an even head_dim >= 2 and window >= 1"));
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t width = dims.heads * dims.head_dim;
  TWICE_RETURN_IF_ERROR(
      CheckArg(qkv_stride >= 3 * width, kOp, "need qkv_stride >= 3·H·hd"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(rotary_base > 0.0f, kOp, "need rotary_base > 0"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "qkv", qkv_size, StridedExtent(rows, 3 * width, qkv_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(
      kOp, "positions", static_cast<int64_t>(positions.size()), rows));
  for (size_t r = 0; r < positions.size(); ++r) {
    if (positions[r] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": row ", r, " has the negative position ", positions[r]));
    }
  }
  const int64_t per_slot = dims.window * width;
  TWICE_RETURN_IF_ERROR(CheckArg(ring_k_size % per_slot == 0, kOp,
                                 "ring_k is not a whole number of slots"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "ring_v", ring_v_size, ring_k_size));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y_size, rows * width));
  return CheckSlots(kOp, slots, ring_k_size / per_slot);
}

absl::Status CausalConv1dStepSlots(absl::Span<const float> x, int64_t channels,
                                   int64_t x_stride,
                                   absl::Span<const float> weight,
                                   int64_t kernel_size, absl::Span<float> tails,
                                   absl::Span<const int32_t> slots,
                                   absl::Span<float> out) {
  TWICE_RETURN_IF_ERROR(CheckConvStepSlots(x.size(), channels, x_stride,
                                           weight.size(), kernel_size,
                                           tails.size(), slots, out.size()));
  const int64_t per_slot = (kernel_size - 1) * channels;
  for (size_t r = 0; r < slots.size(); ++r) {
    TWICE_RETURN_IF_ERROR(CausalConv1d(
        x.subspan(r * x_stride, channels), 1, channels, x_stride, weight,
        kernel_size, tails.subspan(slots[r] * per_slot, per_slot),
        out.subspan(r * channels, channels)));
  }
  return absl::OkStatus();
}

absl::Status SsdStepSlots(const SsdShape& shape, absl::Span<const float> x,
                          int64_t x_stride, absl::Span<const float> b,
                          absl::Span<const float> c, int64_t bc_stride,
                          absl::Span<const float> dt, absl::Span<const float> a,
                          absl::Span<const float> d, absl::Span<float> states,
                          absl::Span<const int32_t> slots,
                          absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckSsdStepSlots(
      shape, x.size(), x_stride, b.size(), c.size(), bc_stride, dt.size(),
      a.size(), d.size(), states.size(), slots, y.size()));
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  const int64_t per_slot = hp * shape.state;
  for (size_t r = 0; r < slots.size(); ++r) {
    TWICE_RETURN_IF_ERROR(SsdStep(
        shape, x.subspan(r * x_stride, hp), b.subspan(r * bc_stride, gn),
        c.subspan(r * bc_stride, gn), dt.subspan(r * shape.heads, shape.heads),
        a, d, states.subspan(slots[r] * per_slot, per_slot),
        y.subspan(r * hp, hp)));
  }
  return absl::OkStatus();
}

absl::Status LinearAttentionStepSlots(
    absl::Span<const float> q, absl::Span<const float> k,
    absl::Span<const float> v, const LinearAttentionStepDims& dims, float eps,
    absl::Span<float> kv_states, absl::Span<float> k_states,
    absl::Span<const int32_t> slots, absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckLinearAttentionStepSlots(
      dims, q.size(), k.size(), v.size(), kv_states.size(), k_states.size(),
      slots, y.size()));
  const int64_t rows = static_cast<int64_t>(slots.size());
  if (rows == 0) return absl::OkStatus();
  const int64_t h = dims.heads;
  const int64_t hd = dims.head_dim;
  const int64_t d = TaylorFeatureDim(dims.feature_dim);
  // Every row's features at once: [rows, H, D].
  std::vector<float> phi_q(rows * h * d), phi_k(rows * h * d);
  TWICE_RETURN_IF_ERROR(
      TaylorFeatureMap(q, rows * h, dims.feature_dim, absl::MakeSpan(phi_q)));
  TWICE_RETURN_IF_ERROR(
      TaylorFeatureMap(k, rows * h, dims.feature_dim, absl::MakeSpan(phi_k)));
  const LinearAttentionDims step{h, hd, d};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t s = slots[r];
    TWICE_RETURN_IF_ERROR(LinearAttentionStep(
        absl::MakeConstSpan(phi_q).subspan(r * h * d, h * d),
        absl::MakeConstSpan(phi_k).subspan(r * h * d, h * d),
        v.subspan(r * h * hd, h * hd), step, eps,
        kv_states.subspan(s * h * hd * d, h * hd * d),
        k_states.subspan(s * h * d, h * d), y.subspan(r * h * hd, h * hd)));
  }
  return absl::OkStatus();
}

absl::Status WindowAttentionStepSlots(
    absl::Span<const float> qkv, int64_t qkv_stride, const WindowStepDims& dims,
    float rotary_base, float scale, absl::Span<const int64_t> positions,
    absl::Span<float> ring_k, absl::Span<float> ring_v,
    absl::Span<const int32_t> slots, absl::Span<float> y) {
  TWICE_RETURN_IF_ERROR(CheckWindowAttentionStepSlots(
      dims, qkv.size(), qkv_stride, rotary_base, positions, ring_k.size(),
      ring_v.size(), slots, y.size()));
  const int64_t h = dims.heads;
  const int64_t hd = dims.head_dim;
  const int64_t len = dims.window;
  const int64_t width = h * hd;
  std::vector<float> qk(2 * width);  // the row's rotated q | k
  // Context of one row: up to L ring rows in time order, then the token.
  std::vector<float> ctx_k((len + 1) * width), ctx_v((len + 1) * width);
  for (size_t r = 0; r < slots.size(); ++r) {
    const int64_t p = positions[r];
    const float* row = qkv.data() + r * qkv_stride;
    float* ring_k_slot = ring_k.data() + slots[r] * len * width;
    float* ring_v_slot = ring_v.data() + slots[r] * len * width;
    std::copy(row, row + 2 * width, qk.begin());
    // q and k turn by the same angles: rotate them as one row of 2H heads.
    TWICE_RETURN_IF_ERROR(RopeRotateHalf(absl::MakeSpan(qk), 1, 2 * width,
                                         2 * h, hd, p, rotary_base));
    const int64_t past = std::min(p, len);
    for (int64_t j = 0; j < past; ++j) {
      const int64_t src = ((p - past + j) % len) * width;
      std::copy_n(ring_k_slot + src, width, ctx_k.begin() + j * width);
      std::copy_n(ring_v_slot + src, width, ctx_v.begin() + j * width);
    }
    std::copy_n(qk.begin() + width, width, ctx_k.begin() + past * width);
    std::copy_n(row + 2 * width, width, ctx_v.begin() + past * width);
    const int64_t context = (past + 1) * width;
    TWICE_RETURN_IF_ERROR(WindowAttention(
        absl::MakeConstSpan(qk).subspan(0, width), width,
        absl::MakeConstSpan(ctx_k).subspan(0, context),
        absl::MakeConstSpan(ctx_v).subspan(0, context), {1, past, h, hd, len},
        scale, y.subspan(r * width, width)));
    // Ring row p mod L held position p - L (just attended, now out of
    // every later window): the token takes its place.
    const int64_t dst = (p % len) * width;
    std::copy_n(ctx_k.begin() + past * width, width, ring_k_slot + dst);
    std::copy_n(ctx_v.begin() + past * width, width, ring_v_slot + dst);
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
