// Decode-step operations over a batch of sequences whose recurrent states
// live in the slots of one array (a resident executor's state pool,
// engine/executor/mamba2_executor.h): row r of the inputs belongs to the
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
//
// Slots must be distinct and in [0, capacity), capacity = the state array's
// size / one slot's size (INVALID_ARGUMENT otherwise: two rows updating one
// state would race). Row r's results equal the single-sequence op's on
// that slot's state.
#ifndef TWICE_KERNELS_SLOT_STEPS_H_
#define TWICE_KERNELS_SLOT_STEPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/ssd_chunk_scan.h"

namespace twice::kernels {

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

// The checks of the two on sizes, shared with their CUDA twins.
[[nodiscard]] absl::Status CheckConvStepSlots(
    int64_t x_size, int64_t channels, int64_t x_stride, int64_t weight_size,
    int64_t kernel_size, int64_t tails_size, absl::Span<const int32_t> slots,
    int64_t out_size);
[[nodiscard]] absl::Status CheckSsdStepSlots(
    const SsdShape& shape, int64_t x_size, int64_t x_stride, int64_t b_size,
    int64_t c_size, int64_t bc_stride, int64_t dt_size, int64_t a_size,
    int64_t d_size, int64_t states_size, absl::Span<const int32_t> slots,
    int64_t y_size);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_SLOT_STEPS_H_
