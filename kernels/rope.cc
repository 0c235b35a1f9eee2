#include "kernels/rope.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status RopeRotateHalf(absl::Span<float> x, int64_t rows,
                            int64_t row_stride, int64_t heads, int64_t head_dim,
                            int64_t start_pos, float base) {
  constexpr char kOp[] = "RopeRotateHalf";
  TWICE_RETURN_IF_ERROR(CheckArg(
      rows >= 0 && heads >= 1 && head_dim >= 2 && head_dim % 2 == 0, kOp,
      "need rows >= 0, heads >= 1 and an even "
      "head_dim >= 2"));
  TWICE_RETURN_IF_ERROR(CheckArg(row_stride >= heads * head_dim, kOp,
                                 "row_stride < heads * head_dim"));
  TWICE_RETURN_IF_ERROR(CheckArg(start_pos >= 0 && base > 0.0f, kOp,
                                 "need start_pos >= 0, base > 0"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "x", x.size(), StridedExtent(rows, heads * head_dim, row_stride)));
  if (rows == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.RopeRotateHalf(x, rows, row_stride, heads, head_dim, start_pos,
                                base);
      },
      [&] {
        cpu::RopeRotateHalf(x.data(), rows, row_stride, heads, head_dim,
                            start_pos, base);
        return absl::OkStatus();
      });
}

absl::Status RopeRotateHalfAt(absl::Span<float> x, int64_t rows,
                              int64_t row_stride, int64_t heads,
                              int64_t head_dim,
                              absl::Span<const int64_t> positions, float base) {
  constexpr char kOp[] = "RopeRotateHalfAt";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && static_cast<int64_t>(positions.size()) == rows, kOp,
               "need one position per row"));
  TWICE_RETURN_IF_ERROR(CheckArg(row_stride >= heads * head_dim, kOp,
                                 "row_stride < heads * head_dim"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(
      kOp, "x", x.size(), StridedExtent(rows, heads * head_dim, row_stride)));
  for (int64_t p : positions) {
    TWICE_RETURN_IF_ERROR(CheckArg(p >= 0, kOp, "a position is negative"));
  }
  // Row by row through the consecutive-position op: its checks and its
  // backend dispatch hold for each one-row call.
  for (int64_t i = 0; i < rows; ++i) {
    TWICE_RETURN_IF_ERROR(RopeRotateHalf(x.subspan(i * row_stride), 1,
                                         row_stride, heads, head_dim,
                                         positions[i], base));
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
