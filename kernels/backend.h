// KernelBackend: where the kernels/ entry points run — the one device
// dispatch point of the project.
//
// Every entry point of kernels/ (linear.h, rms_norm.h, ...) validates its
// arguments, then asks ActiveKernelBackend(): with none installed (the
// default) it runs its CPU implementation; with one installed it hands the
// call to the backend's method of the same name and arguments, which must
// compute the same function (its CPU twin is the oracle its tests compare
// against). Data stays in host memory at this interface: a device backend
// copies inputs in and outputs (and in-place states) back within the call,
// so the engine, the states and the store are unchanged by the device.
//
// A backend may decline a shape it does not cover by returning
// UNIMPLEMENTED; the entry point then runs the CPU implementation, and the
// backend counts the call per op (kernel_stats.h: its stats say how much of
// the work it ran and how many bytes it moved). Any other error is the
// call's error.
//
// Weights: a device backend may keep device copies of host memory that can
// never change while it is registered as immutable (ImmutableHostRegions:
// read-only mappings of weight files). Memory outside such a region is
// copied on every call.
//
// Thread safety: SetKernelBackend is meant for process start (before any
// kernel runs) and tests; ActiveKernelBackend is a lock-free read. A
// backend's methods may be called from many threads at once.
#ifndef TWICE_KERNELS_BACKEND_H_
#define TWICE_KERNELS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/attention_decode.h"
#include "kernels/kernel_stats.h"
#include "kernels/linear_attention.h"
#include "kernels/rat_chunk_attention.h"
#include "kernels/sampling.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/taylor_linear_attention.h"
#include "kernels/tensor.h"
#include "kernels/window_attention.h"

namespace twice::kernels {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;

  // "cuda:0 (NVIDIA H200)", for logs and /healthz.
  virtual std::string name() const = 0;
  virtual KernelBackendStats stats() const = 0;

  // Arguments are already validated by the entry point (sizes match the
  // dimensions); see each entry point's header for the equations.
  // `weight` may be of any dtype (linear.h); a backend declines the ones it
  // has no kernel for with UNIMPLEMENTED (kernels/check.h UnsupportedTensor).
  virtual absl::Status Linear(absl::Span<const float> x, int64_t m, int64_t k,
                              const Tensor& weight, int64_t n,
                              absl::Span<const float> bias,
                              absl::Span<float> y) = 0;
  virtual absl::Status RmsNorm(absl::Span<const float> x, int64_t rows,
                               int64_t dim, absl::Span<const float> weight,
                               float eps, absl::Span<float> y) = 0;
  virtual absl::Status RopeRotateHalf(absl::Span<float> x, int64_t rows,
                                      int64_t row_stride, int64_t heads,
                                      int64_t head_dim, int64_t start_pos,
                                      float base) = 0;
  virtual absl::Status SiluMul(absl::Span<const float> gate,
                               int64_t gate_stride,
                               absl::Span<const float> mult,
                               int64_t mult_stride, int64_t rows, int64_t cols,
                               absl::Span<float> out) = 0;
  virtual absl::Status SwiGlu(absl::Span<const float> u, int64_t rows,
                              int64_t hidden, absl::Span<float> out) = 0;
  virtual absl::Status TaylorFeatureMap(absl::Span<const float> x, int64_t rows,
                                        int64_t feature_dim,
                                        absl::Span<float> out) = 0;
  virtual absl::Status CausalConv1d(absl::Span<const float> x, int64_t tokens,
                                    int64_t channels, int64_t x_stride,
                                    absl::Span<const float> weight,
                                    int64_t kernel_size, absl::Span<float> tail,
                                    absl::Span<float> out) = 0;
  // Causal linear attention over featurized inputs; LinearAttentionStep is
  // this with tokens = 1, and PrefixLinearAttentionPrefill with
  // encoder_tokens = 0 is LinearAttentionPrefill.
  virtual absl::Status PrefixLinearAttentionPrefill(
      absl::Span<const float> phi_q, absl::Span<const float> phi_k,
      absl::Span<const float> v, int64_t tokens,
      absl::Span<const float> phi_k_enc, absl::Span<const float> v_enc,
      int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
      absl::Span<float> kv_state, absl::Span<float> k_state,
      absl::Span<float> y) = 0;
  // The feature map and the prefill above as one op (a fused kernel);
  // declining it runs the two entry points instead.
  virtual absl::Status TaylorLinearAttention(
      absl::Span<const float> q, absl::Span<const float> k,
      absl::Span<const float> v, int64_t tokens, absl::Span<const float> k_enc,
      absl::Span<const float> v_enc, int64_t encoder_tokens,
      const TaylorAttentionDims& dims, float eps, absl::Span<float> kv_state,
      absl::Span<float> k_state, absl::Span<float> y) = 0;
  virtual absl::Status WindowAttention(absl::Span<const float> q,
                                       int64_t q_stride,
                                       absl::Span<const float> k,
                                       absl::Span<const float> v,
                                       const WindowAttentionDims& dims,
                                       float scale, absl::Span<float> out) = 0;
  virtual absl::Status CausalGqaAttention(
      absl::Span<const float> q, int64_t q_stride, absl::Span<const float> k,
      absl::Span<const float> v, const CausalAttentionDims& dims, float scale,
      absl::Span<float> out) = 0;
  virtual absl::Status RatChunkAttention(
      StridedRows q, StridedRows own_k, StridedRows own_v, StridedRows chunk_k,
      StridedRows chunk_v, absl::Span<const int64_t> visible,
      const RatAttentionDims& dims, float scale, absl::Span<float> out) = 0;
  // SsdStep is this with tokens = 1 (the same recurrence).
  virtual absl::Status SsdChunkScan(
      const SsdShape& shape, int64_t tokens, int64_t chunk,
      absl::Span<const float> x, int64_t x_stride, absl::Span<const float> b,
      absl::Span<const float> c, int64_t bc_stride, absl::Span<const float> dt,
      absl::Span<const float> a, absl::Span<const float> d,
      absl::Span<float> state, absl::Span<float> y) = 0;
  // The next token of each row (sampling.h); a device twin may differ from
  // the CPU only within summation rounding at a boundary.
  virtual absl::Status SampleRows(absl::Span<const float> logits, int64_t rows,
                                  int64_t row_stride, int64_t vocab,
                                  absl::Span<const SamplingRule> rules,
                                  absl::Span<int32_t> out) = 0;
};

// Installs `backend` for every later kernel call of this process (nullptr:
// back to the CPU). The previous backend stays alive while calls that
// started on it finish.
void SetKernelBackend(std::shared_ptr<KernelBackend> backend);
// The installed backend, or nullptr for the CPU.
std::shared_ptr<KernelBackend> ActiveKernelBackend();

// Runs `device_call` on the active backend, or `cpu_call` when there is
// none or the backend declines the shape (UNIMPLEMENTED).
template <typename DeviceCall, typename CpuCall>
absl::Status Dispatch(DeviceCall device_call, CpuCall cpu_call) {
  if (std::shared_ptr<KernelBackend> backend = ActiveKernelBackend()) {
    absl::Status status = device_call(*backend);
    if (!absl::IsUnimplemented(status)) return status;
  }
  return cpu_call();
}

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_BACKEND_H_
