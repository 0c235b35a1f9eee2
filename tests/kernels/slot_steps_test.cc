// The slot-indexed decode steps (kernels/slot_steps.h) against the
// single-sequence operations they batch (causal_conv1d, SsdStep, each
// checked against float64 references in sequence_kernels_test.cc and
// ssd_chunk_scan_test.cc): row r must give exactly what the single op gives
// on slot slots[r]'s state, other slots untouched; bad slot maps refused.
#include "kernels/slot_steps.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/causal_conv1d.h"
#include "kernels/ssd_chunk_scan.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::RandomVector;

TEST(SlotStepsTest, ConvStepPerRowEqualsTheSingleSequenceStep) {
  const int64_t channels = 37, stride = 50, k = 4, capacity = 7;
  const std::vector<int32_t> slots = {5, 0, 3, 6};
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t per_slot = (k - 1) * channels;
  const std::vector<float> x = RandomVector(rows * stride, 1);
  const std::vector<float> w = RandomVector(channels * k, 2);
  std::vector<float> tails = RandomVector(capacity * per_slot, 3);
  std::vector<float> want_tails = tails;
  std::vector<float> out(rows * channels), want(rows * channels);
  ASSERT_OK(CausalConv1dStepSlots(x, channels, stride, w, k,
                                  absl::MakeSpan(tails), slots,
                                  absl::MakeSpan(out)));
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_OK(CausalConv1d(
        absl::MakeConstSpan(x).subspan(r * stride, channels), 1, channels,
        stride, w, k,
        absl::MakeSpan(want_tails).subspan(slots[r] * per_slot, per_slot),
        absl::MakeSpan(want).subspan(r * channels, channels)));
  }
  EXPECT_EQ(out, want);
  EXPECT_EQ(tails, want_tails);  // slots 1, 2, 4 untouched in both
}

TEST(SlotStepsTest, SsdStepPerRowEqualsTheSingleSequenceStep) {
  const SsdShape shape{6, 8, 2, 12};
  const int64_t hp = 48, gn = 24, stride = hp + 2 * gn + 3, capacity = 5;
  const std::vector<int32_t> slots = {4, 1, 2};
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t per_slot = hp * shape.state;
  const std::vector<float> xbc = RandomVector(rows * stride, 4);
  std::vector<float> dt = RandomVector(rows * shape.heads, 5, 0.5f);
  for (float& v : dt) v = std::abs(v);
  std::vector<float> a = RandomVector(shape.heads, 6, 2.0f);
  for (float& v : a) v = -std::abs(v);
  const std::vector<float> d = RandomVector(shape.heads, 7);
  std::vector<float> states = RandomVector(capacity * per_slot, 8);
  std::vector<float> want_states = states;
  std::vector<float> y(rows * hp), want(rows * hp);
  const absl::Span<const float> all = xbc;
  ASSERT_OK(SsdStepSlots(shape, all, stride, all.subspan(hp),
                         all.subspan(hp + gn), stride, dt, a, d,
                         absl::MakeSpan(states), slots, absl::MakeSpan(y)));
  for (int64_t r = 0; r < rows; ++r) {
    const absl::Span<const float> row = all.subspan(r * stride, stride);
    ASSERT_OK(SsdStep(
        shape, row.subspan(0, hp), row.subspan(hp, gn),
        row.subspan(hp + gn, gn),
        absl::MakeConstSpan(dt).subspan(r * shape.heads, shape.heads), a, d,
        absl::MakeSpan(want_states).subspan(slots[r] * per_slot, per_slot),
        absl::MakeSpan(want).subspan(r * hp, hp)));
  }
  EXPECT_EQ(y, want);
  EXPECT_EQ(states, want_states);
}

TEST(SlotStepsTest, BadSlotMapsAreRefused) {
  const int64_t channels = 8, k = 3, capacity = 3;
  const std::vector<float> x(2 * channels), w(channels * k);
  std::vector<float> tails(capacity * (k - 1) * channels);
  std::vector<float> out(2 * channels);
  for (const std::vector<int32_t>& slots :
       {std::vector<int32_t>{1, 1}, std::vector<int32_t>{0, 3},
        std::vector<int32_t>{-1, 0}}) {
    EXPECT_EQ(
        CausalConv1dStepSlots(x, channels, channels, w, k,
                              absl::MakeSpan(tails), slots, absl::MakeSpan(out))
            .code(),
        absl::StatusCode::kInvalidArgument);
  }
  // A state array that is not a whole number of slots.
  std::vector<float> ragged(tails.size() + 1);
  EXPECT_EQ(
      CausalConv1dStepSlots(x, channels, channels, w, k, absl::MakeSpan(ragged),
                            std::vector<int32_t>{0, 1}, absl::MakeSpan(out))
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels
