#include "kernels/sampling.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status ValidateSamplingRule(const SamplingRule& rule) {
  if (!std::isfinite(rule.temperature) || rule.temperature < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "temperature must be finite and >= 0, got ", rule.temperature));
  }
  if (rule.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be >= 0, got ", rule.top_k));
  }
  if (!(rule.top_p > 0.0f && rule.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p must be in (0, 1], got ", rule.top_p));
  }
  return absl::OkStatus();
}

absl::Status SampleRows(absl::Span<const float> logits, int64_t rows,
                        int64_t row_stride, int64_t vocab,
                        absl::Span<const SamplingRule> rules,
                        absl::Span<int32_t> out) {
  constexpr char kOp[] = "SampleRows";
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && vocab >= 1 &&
                                     vocab <= int64_t{INT32_MAX} &&
                                     row_stride >= vocab,
                                 kOp,
                                 "need rows >= 0, 1 <= vocab < 2^31 and "
                                 "row_stride >= vocab"));
  TWICE_RETURN_IF_ERROR(CheckAtLeast(kOp, "logits", logits.size(),
                                     StridedExtent(rows, vocab, row_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "rules", rules.size(), rows));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "out", out.size(), rows));
  for (const SamplingRule& rule : rules) {
    if (absl::Status status = ValidateSamplingRule(rule); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": ", status.message()));
    }
  }
  if (rows == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.SampleRows(logits, rows, row_stride, vocab, rules, out);
      },
      [&] {
        // Rows are independent (each draw is a function of its own rule),
        // so a decode batch's rows spread over the kernel pool.
        cpu::ParallelFor(rows, [&](int64_t r) {
          out[r] =
              cpu::SampleRow(logits.data() + r * row_stride, vocab, rules[r]);
        });
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
