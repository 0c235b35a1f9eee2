// CudaKernelBackend: the kernels/ entry points on one NVIDIA GPU
// (kernels/backend.h), so every model the engine runs — Based, JRT-RNN,
// Mamba-2, Llama, RAT — runs its kernels on the device unchanged.
//
// What runs where: projections (Linear) through cuBLASLt with bf16 inputs
// and f32 accumulation (kernels/cuda/gemm.h); every other op in f32 with the
// kernels of cuda_ops.h. Activations and states stay host-resident at this
// interface: each call copies its inputs in and its outputs (and in-place
// states) back, so the engine, the state codec and the store are untouched;
// stats() counts those bytes.
//
// Weights are uploaded once and reused when their host bytes cannot change:
// ranges inside an ImmutableHostRegion (the read-only mappings of
// model.safetensors) and the immutable shared buffers of converted or
// quantized tensors (kernels/tensor.h shared_storage). A Linear weight of
// any dtype is kept on the device as bf16, made on the device from the
// bytes as stored (f32 rounded, f16 converted, int8 dequantized with its
// block scales), so a bf16 / f16 / int8 checkpoint is never widened on the
// host. Other memory is copied per call.
//
// Based's and JRT-RNN's linear attention (TaylorLinearAttention) runs the
// fused chunked kernel of based_cuda.cu (feature map inside, bf16 inputs,
// f32 state) for feature_dim 16 and head_dim 64, the published shapes;
// other shapes decline it and run the feature map and the f32 featurized
// kernel as two ops.
//
// Shapes the device kernels do not cover are declined (UNIMPLEMENTED) and
// run on the CPU, counted per op in stats(): Linear with k or n not a
// multiple of 8, softmax/RAT attention with head_dim above 128, SSD with
// N > 128, feature widths above 2048, conv kernels above 64.
//
// Concurrency: a call runs on a lane — a stream with its own GEMM runner
// and allocator — taken from a pool of up to `max_lanes` for the duration
// of the call, so calls from different threads overlap on the device
// (there is no backend-wide lock; only the weight cache has one). A device
// error fails that call with the converted status and never aborts.
#ifndef TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_H_
#define TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_H_

#include <condition_variable>
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
  static constexpr int kDefaultMaxLanes = 8;

  // FAILED_PRECONDITION when `device` is not a usable GPU. Lanes are made
  // on demand (the first at once, to prove the device works), at most
  // `max_lanes` (>= 1); a call that finds all busy waits for one.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<CudaKernelBackend>>
  Create(int device = 0, int max_lanes = kDefaultMaxLanes);
  ~CudaKernelBackend() override;

  std::string name() const override { return name_; }
  KernelBackendStats stats() const override;
  // Device bytes held by cached weights.
  int64_t cached_weight_bytes() const;
  // Lanes made so far (<= max_lanes).
  int lanes() const;

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
  absl::Status TaylorLinearAttention(
      absl::Span<const float> q, absl::Span<const float> k,
      absl::Span<const float> v, int64_t tokens, absl::Span<const float> k_enc,
      absl::Span<const float> v_enc, int64_t encoder_tokens,
      const TaylorAttentionDims& dims, float eps, absl::Span<float> kv_state,
      absl::Span<float> k_state, absl::Span<float> y) override;
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
  absl::Status SampleRows(absl::Span<const float> logits, int64_t rows,
                          int64_t row_stride, int64_t vocab,
                          absl::Span<const SamplingRule> rules,
                          absl::Span<int32_t> out) override;

 private:
  struct Lane;
  class LaneLease;
  // Device copies made for one call, on its lane.
  class CallScope;
  // A weight's device copy; shared by the cache and the calls using it, so
  // an entry dropped from the cache stays alive until those calls end.
  struct CachedWeight {
    // Valid while the region is registered (views of mapped files) ...
    uint64_t region_id = 0;
    // ... or while the immutable host buffer is alive (shared storage).
    std::weak_ptr<const void> owner;
    std::shared_ptr<const DeviceBuffer> buffer;
  };
  // (host address, bytes, dtype of the device copy: F32 or BF16)
  using WeightKey = std::tuple<const void*, int64_t, DType>;

  CudaKernelBackend(std::string name, int device, int max_lanes);

  [[nodiscard]] absl::StatusOr<std::unique_ptr<Lane>> NewLane();
  // Blocks until a lane is free (or a new one can be made).
  [[nodiscard]] absl::StatusOr<LaneLease> AcquireLane();

  // The device copy of host[0, count): the cached one when the range lies
  // in an ImmutableHostRegion, else a fresh copy owned by `scope`.
  [[nodiscard]] absl::StatusOr<DeviceSpan<const float>> Input(
      CallScope& scope, absl::Span<const float> host, int64_t count);
  // An activation as bf16 (copied, converted on the device).
  [[nodiscard]] absl::StatusOr<DeviceSpan<const Bf16>> InputBf16(
      CallScope& scope, absl::Span<const float> host, int64_t count);
  // A Linear weight of any dtype as bf16: cached when immutable.
  [[nodiscard]] absl::StatusOr<DeviceSpan<const Bf16>> WeightBf16(
      CallScope& scope, const Tensor& weight);
  // A device copy of host[0, count) that the op may write (states, in-place
  // outputs), or uninitialised device memory of `count` floats when `copy`
  // is false (pure outputs).
  [[nodiscard]] absl::StatusOr<DeviceSpan<float>> Output(
      CallScope& scope, absl::Span<const float> host, int64_t count, bool copy);
  // Copies device results back (synchronising the lane's stream, which
  // also surfaces an asynchronous kernel fault as this call's status).
  [[nodiscard]] absl::Status Fetch(CallScope& scope, DeviceSpan<float> device,
                                   absl::Span<float> host);
  // The cached copy of an immutable weight (`dtype` F32 or BF16), uploaded
  // on `scope`'s lane on a miss; nullptr when the bytes are not immutable.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const DeviceBuffer>> Cached(
      CallScope& scope, const Tensor& host, DType dtype);
  // Uploads `host` (any dtype) as a device tensor of `dtype` (F32 or BF16).
  [[nodiscard]] absl::StatusOr<DeviceBuffer> Upload(CallScope& scope,
                                                    DeviceAllocator& allocator,
                                                    const Tensor& host,
                                                    DType dtype);
  // Stages q (rows of q_row floats, q_stride apart), k and v ([past +
  // tokens] rows of kv_row) and out, runs `launch` on the device copies.
  using SoftmaxLaunch = std::function<absl::Status(
      CallScope& scope, DeviceSpan<const float> q, DeviceSpan<const float> k,
      DeviceSpan<const float> v, DeviceSpan<float> out)>;
  absl::Status SoftmaxAttention(KernelOp op, absl::Span<const float> q,
                                int64_t q_stride, absl::Span<const float> k,
                                absl::Span<const float> v, int64_t tokens,
                                int64_t past, int64_t q_row, int64_t kv_row,
                                absl::Span<float> out,
                                const SoftmaxLaunch& launch);
  // Drops cache entries whose region was unregistered or whose buffer died.
  void PruneCacheLocked();
  absl::Status Declined(KernelOp op);
  absl::Status Ran(KernelOp op, absl::Status status);

  const std::string name_;
  const int device_;
  const int max_lanes_;
  // The fused Based/JRT prefill runs here (cuda_ops.h); else it declines.
  const bool fused_linear_attention_fits_;
  // Declared before everything that holds device memory from it.
  DeviceAllocator weight_allocator_;
  KernelStatsCounters counters_;

  mutable std::mutex lanes_mu_;
  std::condition_variable lane_freed_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // every lane made
  std::vector<Lane*> free_lanes_;

  mutable std::mutex weights_mu_;  // the cache; held across a miss's upload
  std::map<WeightKey, CachedWeight> weights_;
  int64_t cached_weight_bytes_ = 0;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_CUDA_KERNEL_BACKEND_H_
