// Decode-step operations over a batch of sequences whose recurrent states
// live in the slots of one array (a resident executor's state pool,
// engine/executor/resident_executor.h): row r of the inputs belongs to the
// sequence in slot slots[r], whose state it reads and updates. One call
// serves the whole batch, so a device runs it as one launch instead of one
// per sequence.
//
//   CausalConv1dStepSlots   kernels/causal_conv1d.h with one token per row:
//                           x [rows, C] (row stride x_stride), w [C, K],
//                           tails [capacity, K-1, C], out [rows, C]
//   SsdStepSlots            kernels/ssd_chunk_scan.h SsdStep per row:
//                           x [rows, H·P] (stride x_stride), B, C [rows,
//                           G·N] (stride bc_stride), dt [rows, H],
//                           states [capacity, H, P, N], y [rows, H·P]
//   LinearAttentionStepSlots
//                           kernels/taylor_feature_map.h on the raw q and
//                           k rows, then kernels/linear_attention.h
//                           LinearAttentionStep per row (update first,
//                           then read): q, k [rows, H, F]; v, y [rows, H,
//                           hd]; kv_states [capacity, H, hd, D], k_states
//                           [capacity, H, D], D = 1 + F + F^2
//   WindowAttentionStepSlots
//                           engine/layers/sliding_window_attention.cc's
//                           attention for one token per row at position
//                           p = positions[r] (tokens read before it):
//                           q and k of qkv [rows, 3·H·hd] (q | k | v, row
//                           stride qkv_stride) rotated by kernels/rope.h at
//                           p (on copies: qkv is not written), then
//                           kernels/window_attention.h over the ring rows
//                           of positions max(0, p - L) .. p-1 followed by
//                           the token itself (past = min(p, L), window L),
//                           then the rotated k and v stored in ring row
//                           p mod L. ring_k, ring_v [capacity, L, H, hd]
//                           (engine/layers/window_kv_state.h per slot),
//                           y [rows, H·hd]
//
// Slots must be distinct and in [0, capacity), capacity = the state array's
// size / one slot's size (INVALID_ARGUMENT otherwise: two rows updating one
// state would race). Row r's results equal the single-sequence op's on
// that slot's state. Every check runs before any state is written, so a
// refused call changes nothing.
#ifndef TWICE_KERNELS_SLOT_STEPS_H_
#define TWICE_KERNELS_SLOT_STEPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/taylor_linear_attention.h"

namespace twice::kernels {

// The Based step's shape: heads H, head_dim hd (width of a value vector)
// and the raw q / k width F (D = 1 + F + F^2), the fields of the
// single-sequence op's dims.
using LinearAttentionStepDims = TaylorAttentionDims;

struct WindowStepDims {
  int64_t heads = 0;     // H
  int64_t head_dim = 0;  // hd, even (rotate-half RoPE)
  int64_t window = 0;    // L, ring rows per slot = keys a token sees, >= 1
};

[[nodiscard]] absl::Status CausalConv1dStepSlots(
    absl::Span<const float> x, int64_t channels, int64_t x_stride,
    absl::Span<const float> weight, int64_t kernel_size,
    absl::Span<float> tails, absl::Span<const int32_t> slots,
    absl::Span<float> out);

[[nodiscard]] absl::Status SsdStepSlots(
    const SsdShape& shape, absl::Span<const float> x, int64_t x_stride,
    absl::Span<const float> b, absl::Span<const float> c, int64_t bc_stride,
    absl::Span<const float> dt, absl::Span<const float> a,
    absl::Span<const float> d, absl::Span<float> states,
    absl::Span<const int32_t> slots, absl::Span<float> y);

[[nodiscard]] absl::Status LinearAttentionStepSlots(
    absl::Span<const float> q, absl::Span<const float> k,
    absl::Span<const float> v, const LinearAttentionStepDims& dims, float eps,
    absl::Span<float> kv_states, absl::Span<float> k_states,
    absl::Span<const int32_t> slots, absl::Span<float> y);

// positions[r] >= 0 is the number of tokens slot slots[r]'s sequence read
// before this one (one per row); rotary_base > 0.
[[nodiscard]] absl::Status WindowAttentionStepSlots(
    absl::Span<const float> qkv, int64_t qkv_stride, const WindowStepDims& dims,
    float rotary_base, float scale, absl::Span<const int64_t> positions,
    absl::Span<float> ring_k, absl::Span<float> ring_v,
    absl::Span<const int32_t> slots, absl::Span<float> y);

// The checks of the ops on sizes (and positions), shared with their CUDA
// twins.
[[nodiscard]] absl::Status CheckConvStepSlots(
    int64_t x_size, int64_t channels, int64_t x_stride, int64_t weight_size,
    int64_t kernel_size, int64_t tails_size, absl::Span<const int32_t> slots,
    int64_t out_size);
[[nodiscard]] absl::Status CheckSsdStepSlots(
    const SsdShape& shape, int64_t x_size, int64_t x_stride, int64_t b_size,
    int64_t c_size, int64_t bc_stride, int64_t dt_size, int64_t a_size,
    int64_t d_size, int64_t states_size, absl::Span<const int32_t> slots,
    int64_t y_size);
[[nodiscard]] absl::Status CheckLinearAttentionStepSlots(
    const LinearAttentionStepDims& dims, int64_t q_size, int64_t k_size,
    int64_t v_size, int64_t kv_states_size, int64_t k_states_size,
    absl::Span<const int32_t> slots, int64_t y_size);
[[nodiscard]] absl::Status CheckWindowAttentionStepSlots(
    const WindowStepDims& dims, int64_t qkv_size, int64_t qkv_stride,
    float rotary_base, absl::Span<const int64_t> positions, int64_t ring_k_size,
    int64_t ring_v_size, absl::Span<const int32_t> slots, int64_t y_size);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_SLOT_STEPS_H_
