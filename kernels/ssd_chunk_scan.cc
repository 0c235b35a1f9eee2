#include "kernels/ssd_chunk_scan.h"

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cpu/ssd_chunk_scan_cpu.h"
#include "kernels/status_macros.h"

namespace twice::kernels {
namespace {

[[nodiscard]] absl::Status CheckShape(const SsdShape& s, const char* op) {
  return CheckArg(s.heads >= 1 && s.head_dim >= 1 && s.groups >= 1 &&
                      s.state >= 1 && s.heads % s.groups == 0,
                  op,
                  "need heads, head_dim, groups, state >= 1 and groups "
                  "dividing heads");
}

}  // namespace

absl::Status SsdChunkScan(const SsdShape& shape, int64_t tokens, int64_t chunk,
                          absl::Span<const float> x, int64_t x_stride,
                          absl::Span<const float> b, absl::Span<const float> c,
                          int64_t bc_stride, absl::Span<const float> dt,
                          absl::Span<const float> a, absl::Span<const float> d,
                          absl::Span<float> state, absl::Span<float> y) {
  constexpr char kOp[] = "SsdChunkScan";
  TWICE_RETURN_IF_ERROR(CheckShape(shape, kOp));
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  TWICE_RETURN_IF_ERROR(CheckArg(
      tokens >= 0 && chunk >= 1 && x_stride >= hp && bc_stride >= gn, kOp,
      "need tokens >= 0, chunk >= 1, x_stride >= "
      "H*P, bc_stride >= G*N"));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "x", x.size(), StridedExtent(tokens, hp, x_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "B", b.size(), StridedExtent(tokens, gn, bc_stride)));
  TWICE_RETURN_IF_ERROR(
      CheckAtLeast(kOp, "C", c.size(), StridedExtent(tokens, gn, bc_stride)));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "dt", dt.size(), tokens * shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "A", a.size(), shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "D", d.size(), shape.heads));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "state", state.size(), hp * shape.state));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), tokens * hp));
  if (tokens == 0) return absl::OkStatus();
  return Dispatch(
      [&](KernelBackend& backend) {
        return backend.SsdChunkScan(shape, tokens, chunk, x, x_stride, b, c,
                                    bc_stride, dt, a, d, state, y);
      },
      [&] {
        cpu::SsdChunkScan(shape.heads, shape.head_dim, shape.groups,
                          shape.state, tokens, chunk, x.data(), x_stride,
                          b.data(), c.data(), bc_stride, dt.data(), a.data(),
                          d.data(), state.data(), y.data());
        return absl::OkStatus();
      });
}

absl::Status SsdStep(const SsdShape& shape, absl::Span<const float> x,
                     absl::Span<const float> b, absl::Span<const float> c,
                     absl::Span<const float> dt, absl::Span<const float> a,
                     absl::Span<const float> d, absl::Span<float> state,
                     absl::Span<float> y) {
  constexpr char kOp[] = "SsdStep";
  TWICE_RETURN_IF_ERROR(CheckShape(shape, kOp));
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "x", x.size(), hp));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "B", b.size(), gn));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "C", c.size(), gn));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "dt", dt.size(), shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "A", a.size(), shape.heads));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "D", d.size(), shape.heads));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "state", state.size(), hp * shape.state));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "y", y.size(), hp));
  return Dispatch(
      [&](KernelBackend& backend) {
        // One token of the chunked scan is the step (the same recurrence).
        return backend.SsdChunkScan(shape, 1, 1, x, hp, b, c, gn, dt, a, d,
                                    state, y);
      },
      [&] {
        cpu::SsdStep(shape.heads, shape.head_dim, shape.groups, shape.state,
                     x.data(), b.data(), c.data(), dt.data(), a.data(),
                     d.data(), state.data(), y.data());
        return absl::OkStatus();
      });
}

}  // namespace twice::kernels
