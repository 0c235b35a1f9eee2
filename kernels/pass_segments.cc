#include "kernels/pass_segments.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace twice::kernels {

absl::Status CheckPassSegments(absl::string_view op,
                               absl::Span<const PassSegment> segments,
                               int64_t pass_rows, int64_t slots) {
  std::vector<bool> taken(static_cast<size_t>(slots > 0 ? slots : 0), false);
  int64_t next_row = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const PassSegment& s = segments[i];
    if (s.rows < 1 || s.start < 0 || s.first_row < next_row ||
        s.first_row > pass_rows - s.rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": segment ", i, " (rows ", s.first_row, " + ", s.rows,
          " at position ", s.start,
          ") is empty, starts before its sequence, overlaps the one before "
          "or ends past the pass's ",
          pass_rows, " rows"));
    }
    if (s.slot < 0 || s.slot >= slots || taken[s.slot]) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": segment ", i, "'s slot ", s.slot,
                       " is outside [0, ", slots, ") or another's"));
    }
    taken[s.slot] = true;
    next_row = s.first_row + s.rows;
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
