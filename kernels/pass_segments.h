// The sequences of a prefill pass that reads several at once (the resident
// executor's PrefillBatch): segment s is rows [first_row, first_row + rows)
// of the pass, at positions [start, start + rows) of its sequence, and
// continues the state of its slot in a per-slot pool. The ops that read a
// sequence in order (convolutions, scans, window attention) take the whole
// list, so a device can run every segment in one launch.
#ifndef TWICE_KERNELS_PASS_SEGMENTS_H_
#define TWICE_KERNELS_PASS_SEGMENTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct PassSegment {
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t slot = 0;
  int64_t start = 0;  // the position of its first row in its sequence
};

// INVALID_ARGUMENT naming `op` unless every segment has rows >= 1, start >=
// 0 and lies
// within the pass's `pass_rows` rows after the one before it, and the
// slots are distinct and in [0, slots): segments that overlapped or shared
// a slot would read and write one state from two places at once.
[[nodiscard]] absl::Status CheckPassSegments(
    absl::string_view op, absl::Span<const PassSegment> segments,
    int64_t pass_rows, int64_t slots);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_PASS_SEGMENTS_H_
