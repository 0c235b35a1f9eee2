#include "kernels/taylor_feature_map.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/status_macros.h"

namespace twice::kernels {

absl::Status TaylorFeatureMap(absl::Span<const float> x, int64_t rows,
                              int64_t feature_dim, absl::Span<float> out) {
  constexpr char kOp[] = "TaylorFeatureMap";
  TWICE_RETURN_IF_ERROR(CheckArg(rows >= 0 && feature_dim >= 1, kOp,
                                 "need rows >= 0 and feature_dim >= 1"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x.size(), rows * feature_dim));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "out", out.size(), rows * TaylorFeatureDim(feature_dim)));
  if (rows == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& b) {
        return b.TaylorFeatureMap(x, rows, feature_dim, out);
      },
      [&] {
        cpu::TaylorFeatureMap(x.data(), rows, feature_dim, out.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
