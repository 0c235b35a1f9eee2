// CudaKernelBackend: the kernels/ entry points on one NVIDIA GPU
// (kernels/backend.h), so every model the engine runs — Based, JRT-RNN,
// Mamba-2, Llama, RAT — runs its kernels on the device unchanged.
//
// What runs where: projections (Linear) through cuBLASLt with bf16 inputs
// and f32 accumulation (kernels/cuda/gemm.h); every other op in f32 with the
// kernels of cuda_ops.h. Activations and states stay host-resident at this
// interface: each call copies its inputs in and its outputs (and in-place
// states) back, synchronously, so the engine, the state codec and the store
// are untouched. Weights inside an ImmutableHostRegion (the read-only
// mappings of model.safetensors) are uploaded once and reused — converted to
// bf16 for the GEMMs; other memory is copied per call.
//
// Shapes the device kernels do not cover are declined (UNIMPLEMENTED) and
// run on the CPU, counted in stats().cpu_fallbacks: Linear with k or n not a
// multiple of 8, softmax/RAT attention with head_dim not in {32, 64, 96,
// 128}, SSD with N > 128, feature widths above 2048, conv kernels above 64.
//
// Thread safety: calls from many threads are serialised on the backend's
// one stream (the per-call copies dominate anyway); a device error fails
// that call with the converted status and never aborts.
#ifndef TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_H_
#define TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/stream.h"

namespace twice::kernels::cuda {

class CudaKernelBackend final : public KernelBackend {
 public:
  // FAILED_PRECONDITION when `device` is not a usable GPU.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<CudaKernelBackend>>
  Create(int device = 0);
  ~CudaKernelBackend() override;

  std::string name() const override { return name_; }
  KernelBackendStats stats() const override;
  // Device bytes held by cached weights.
  int64_t cached_weight_bytes() const;

  absl::Status Linear(absl::Span<const float> x, int64_t m, int64_t k,
                      const Tensor& weight, int64_t n,
                      absl::Span<const float> bias,
                      absl::Span<float> y) override;
  absl::Status RmsNorm(absl::Span<const float> x, int64_t rows, int64_t dim,
                       absl::Span<const float> weight, float eps,
                       absl::Span<float> y) override;
  absl::Status RopeRotateHalf(absl::Span<float> x, int64_t rows,
                              int64_t row_stride, int64_t heads,
                              int64_t head_dim, int64_t start_pos,
                              float base) override;
  absl::Status SiluMul(absl::Span<const float> gate, int64_t gate_stride,
                       absl::Span<const float> mult, int64_t mult_stride,
                       int64_t rows, int64_t cols,
                       absl::Span<float> out) override;
  absl::Status SwiGlu(absl::Span<const float> u, int64_t rows, int64_t hidden,
                      absl::Span<float> out) override;
  absl::Status TaylorFeatureMap(absl::Span<const float> x, int64_t rows,
                                int64_t feature_dim,
                                absl::Span<float> out) override;
  absl::Status CausalConv1d(absl::Span<const float> x, int64_t tokens,
                            int64_t channels, int64_t x_stride,
                            absl::Span<const float> weight, int64_t kernel_size,
                            absl::Span<float> tail,
                            absl::Span<float> out) override;
  absl::Status PrefixLinearAttentionPrefill(
      absl::Span<const float> phi_q, absl::Span<const float> phi_k,
      absl::Span<const float> v, int64_t tokens,
      absl::Span<const float> phi_k_enc, absl::Span<const float> v_enc,
      int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
      absl::Span<float> kv_state, absl::Span<float> k_state,
      absl::Span<float> y) override;
  absl::Status WindowAttention(absl::Span<const float> q, int64_t q_stride,
                               absl::Span<const float> k,
                               absl::Span<const float> v,
                               const WindowAttentionDims& dims, float scale,
                               absl::Span<float> out) override;
  absl::Status CausalGqaAttention(absl::Span<const float> q, int64_t q_stride,
                                  absl::Span<const float> k,
                                  absl::Span<const float> v,
                                  const CausalAttentionDims& dims, float scale,
                                  absl::Span<float> out) override;
  absl::Status RatChunkAttention(StridedRows q, StridedRows own_k,
                                 StridedRows own_v, StridedRows chunk_k,
                                 StridedRows chunk_v,
                                 absl::Span<const int64_t> visible,
                                 const RatAttentionDims& dims, float scale,
                                 absl::Span<float> out) override;
  absl::Status SsdChunkScan(const SsdShape& shape, int64_t tokens,
                            int64_t chunk, absl::Span<const float> x,
                            int64_t x_stride, absl::Span<const float> b,
                            absl::Span<const float> c, int64_t bc_stride,
                            absl::Span<const float> dt,
                            absl::Span<const float> a,
                            absl::Span<const float> d, absl::Span<float> state,
                            absl::Span<float> y) override;

 private:
  // Device copies made for one call; freed (back to the allocator's cache)
  // when the call returns.
  class CallScope;
  struct CachedWeight {
    uint64_t region_id = 0;
    DeviceBuffer buffer;
  };
  // (host address, elements, stored as bf16)
  using WeightKey = std::tuple<const float*, int64_t, bool>;

  CudaKernelBackend(std::string name, int device,
                    std::unique_ptr<Stream> stream);

  // The device copy of host[0, count): the cached one when the range lies
  // in an ImmutableHostRegion, else a fresh copy owned by `scope`.
  [[nodiscard]] absl::StatusOr<DeviceSpan<const float>> Input(
      CallScope& scope, absl::Span<const float> host, int64_t count);
  [[nodiscard]] absl::StatusOr<DeviceSpan<const Bf16>> InputBf16(
      CallScope& scope, absl::Span<const float> host, int64_t count);
  // A device copy of host[0, count) that the op may write (states, in-place
  // outputs), or uninitialised device memory of `count` floats when `copy`
  // is false (pure outputs).
  [[nodiscard]] absl::StatusOr<DeviceSpan<float>> Output(
      CallScope& scope, absl::Span<const float> host, int64_t count, bool copy);
  [[nodiscard]] absl::StatusOr<const CachedWeight*> Cached(
      absl::Span<const float> host, int64_t count, bool bf16);
  // Stages q (rows of q_row floats, q_stride apart), k and v ([past +
  // tokens] rows of kv_row) and out, runs `launch` on the device copies.
  using SoftmaxLaunch = std::function<absl::Status(
      DeviceSpan<const float> q, DeviceSpan<const float> k,
      DeviceSpan<const float> v, DeviceSpan<float> out)>;
  absl::Status SoftmaxAttention(absl::Span<const float> q, int64_t q_stride,
                                absl::Span<const float> k,
                                absl::Span<const float> v, int64_t tokens,
                                int64_t past, int64_t q_row, int64_t kv_row,
                                absl::Span<float> out,
                                const SoftmaxLaunch& launch);
  // Drops cache entries whose region was unregistered.
  void PruneCache();
  absl::Status Declined();
  absl::Status Ran(absl::Status status);

  const std::string name_;
  // Declared before everything that holds device memory from it.
  DeviceAllocator allocator_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<GemmRunner> gemm_;
  mutable std::mutex mu_;  // one call at a time on stream_
  std::map<WeightKey, CachedWeight> weights_;
  int64_t cached_weight_bytes_ = 0;
  std::atomic<int64_t> device_calls_{0};
  std::atomic<int64_t> cpu_fallbacks_{0};
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_H_
