#include "kernels/slot_steps.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/causal_conv1d.h"
#include "kernels/check.h"
#include "kernels/status_macros.h"

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

}  // namespace twice::kernels
