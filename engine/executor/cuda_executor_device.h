// CudaExecutorDevice: the CUDA device as an ExecutorDevice. Arrays are
// blocks of one caching allocator, matrices are bf16 copies made once
// (weight_upload.h), every operation is queued on the device's own stream
// (no process-wide lock: each executor owns its device object), uploads
// go through the stream's page-locked ring without draining it, copies to
// the host through a copy stream (host_downloads.h), and GEMMs
// run through its cuBLASLt runner with f32 accumulation; a Linear's f32
// input is converted to bf16 in a scratch block first (by the norm's own
// kernel in RmsNormLinears). The operations are
// defined by family: memory, uploads, GEMMs and sampling in
// cuda_executor_device.cc, the sequence mixers in
// cuda_executor_mixer_ops.cc, the paged states and routed rows in
// cuda_executor_table_ops.cc, the decode-step buffers and recorded graphs
// in cuda_executor_step_ops.cc. Only in builds with CUDA.
#ifndef TWICE_ENGINE_EXECUTOR_CUDA_EXECUTOR_DEVICE_H_
#define TWICE_ENGINE_EXECUTOR_CUDA_EXECUTOR_DEVICE_H_

#if TWICE_HAVE_CUDA
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/executor/cuda_device_arrays.h"
#include "engine/executor/executor_device.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/host_downloads.h"
#include "kernels/cuda/stream.h"
#include "kernels/status_macros.h"

namespace twice::engine::cuda_executor {

class CudaExecutorDevice final : public ExecutorDevice {
 public:
  static absl::StatusOr<std::unique_ptr<ExecutorDevice>> Create(int ordinal);
  ~CudaExecutorDevice() override;
  absl::StatusOr<std::unique_ptr<DeviceArray>> Allocate(
      int64_t floats) override;
  absl::Status Zero(DeviceFloats x) override;
  absl::Status CopyToDevice(absl::Span<const float> host,
                            DeviceFloats device) override;
  absl::Status CopyAllToHost(absl::Span<const HostCopy> copies) override;
  absl::StatusOr<std::unique_ptr<DeviceSlotMap>> UploadSlotMap(
      absl::Span<const int32_t> slots,
      absl::Span<const int64_t> positions) override;
  absl::StatusOr<std::unique_ptr<DeviceStep>> NewStep(int64_t rows) override;
  absl::Status FillStep(DeviceStep& step, absl::Span<const int32_t> ids,
                        absl::Span<const int32_t> slots,
                        absl::Span<const int64_t> positions,
                        absl::Span<const kernels::SamplingRule> rules) override;
  absl::Status EmbedStep(const DeviceStep& step, const DeviceMatrix& table,
                         float scale, DeviceFloats out) override;
  absl::Status SampleStep(DeviceFloats logits, int64_t row_stride,
                          int64_t vocab, DeviceStep& step) override;
  absl::Status CopyStepIds(const DeviceStep& step,
                           absl::Span<int32_t> ids) override;
  bool records_graphs() const override { return true; }
  // A stream capture of `work` on the device's stream, instantiated.
  absl::StatusOr<std::unique_ptr<DeviceGraph>> Capture(
      absl::FunctionRef<absl::Status()> work) override;
  absl::Status Launch(const DeviceGraph& graph) override;
  int64_t layout_generation() const override { return layout_generation_; }
  absl::StatusOr<std::unique_ptr<DeviceBlockTable>> UploadBlockTable(
      absl::Span<const int32_t> table, int64_t width) override;
  absl::Status FillBlockTable(DeviceBlockTable& table,
                              absl::Span<const int32_t> rows,
                              int64_t width) override;
  absl::StatusOr<std::unique_ptr<DeviceMatrixTable>> UploadMatrixTable(
      absl::Span<const DeviceMatrix* const> matrices) override;
  absl::StatusOr<std::unique_ptr<DeviceRoutes>> UploadRoutes(
      kernels::TopKRoutes routes) override;
  absl::Status CopyRows(DeviceFloats src, int64_t src_stride, DeviceFloats dst,
                        int64_t dst_stride, int64_t rows,
                        int64_t cols) override;
  absl::StatusOr<std::unique_ptr<DeviceMatrix>> UploadMatrix(
      const kernels::Tensor& weight) override;
  absl::Status Embedding(absl::Span<const int32_t> ids,
                         const DeviceMatrix& table, float scale,
                         DeviceFloats out) override;
  absl::Status RmsNorm(DeviceFloats x, int64_t rows, int64_t dim,
                       DeviceFloats weight, float eps, DeviceFloats y) override;
  absl::Status Linear(DeviceFloats x, int64_t rows, const DeviceMatrix& weight,
                      DeviceFloats y, const LinearEpilogue& epilogue) override;
  absl::Status Linears(DeviceFloats x, int64_t rows,
                       absl::Span<const LinearOutput> outputs) override;
  // The activation writes only the GEMM's bf16 input.
  absl::Status ActivationLinear(const MlpActivation& act, DeviceFloats a,
                                const DeviceMatrix& weight, DeviceFloats y,
                                const LinearEpilogue& epilogue) override;
  // The norm writes f32 y and the GEMMs' bf16 input in one kernel.
  absl::Status RmsNormLinears(DeviceFloats x, int64_t rows, int64_t dim,
                              DeviceFloats weight, float eps, DeviceFloats y,
                              absl::Span<const LinearOutput> outputs) override;
  std::string name() const override { return name_; }
  DeviceTraffic traffic() const override { return traffic_; }
  absl::Status Synchronize() override { return stream_->Synchronize(); }
  absl::Status MakeCurrent() override;

  // ---- sequence mixers and element-wise (cuda_executor_mixer_ops.cc)
  absl::Status CausalConv1d(DeviceFloats x, int64_t tokens, int64_t channels,
                            int64_t x_stride, DeviceFloats weight,
                            int64_t kernel_size, DeviceFloats tail,
                            DeviceFloats out) override;
  absl::Status BiasSiluRows(DeviceFloats x, int64_t rows,
                            DeviceFloats bias) override;
  absl::Status SoftplusBiasRows(DeviceFloats raw, int64_t rows, int64_t stride,
                                DeviceFloats bias, DeviceFloats out) override;
  absl::Status GatedGroupRmsNorm(DeviceFloats z, int64_t z_stride,
                                 DeviceFloats y, int64_t rows, int64_t width,
                                 int64_t groups, DeviceFloats weight,
                                 double eps, DeviceFloats out) override;
  absl::Status SsdChunkScan(const kernels::SsdShape& shape, int64_t tokens,
                            int64_t chunk, DeviceFloats x, int64_t x_stride,
                            DeviceFloats b, DeviceFloats c, int64_t bc_stride,
                            DeviceFloats dt, DeviceFloats a, DeviceFloats d,
                            DeviceFloats state, DeviceFloats y) override;
  absl::StatusOr<std::unique_ptr<DevicePassSegments>> UploadPassSegments(
      absl::Span<const kernels::PassSegment> segments, int64_t rows,
      int64_t slots) override;
  absl::Status CausalConv1dSegments(DeviceFloats x, int64_t channels,
                                    int64_t x_stride, DeviceFloats weight,
                                    int64_t kernel_size, DeviceFloats tails,
                                    const DevicePassSegments& segments,
                                    DeviceFloats out) override;
  absl::Status SsdChunkScanSegments(
      const kernels::SsdShape& shape, int64_t chunk, DeviceFloats x,
      int64_t x_stride, DeviceFloats b, DeviceFloats c, int64_t bc_stride,
      DeviceFloats dt, DeviceFloats a, DeviceFloats d, DeviceFloats states,
      const DevicePassSegments& segments, DeviceFloats y) override;
  absl::Status RatChunkScanSegments(
      DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
      const DevicePassSegments& segments, const kernels::RatPagedDims& dims,
      const DeviceBlockTable& row_table, DeviceFloats open, DeviceFloats closed,
      DeviceFloats q_out, DeviceFloats k_out, DeviceFloats v_out,
      DeviceFloats z_out) override;
  absl::Status LinearAttentionSegments(DeviceFloats q, DeviceFloats k,
                                       DeviceFloats v,
                                       const kernels::TaylorAttentionDims& dims,
                                       float eps, DeviceFloats kv_states,
                                       DeviceFloats k_states,
                                       const DevicePassSegments& segments,
                                       DeviceFloats y) override;
  absl::Status WindowAttentionSegments(DeviceFloats qkv, int64_t qkv_stride,
                                       const kernels::WindowStepDims& dims,
                                       float rope_base, float scale,
                                       DeviceFloats ring_k, DeviceFloats ring_v,
                                       const DevicePassSegments& segments,
                                       DeviceFloats context,
                                       DeviceFloats y) override;
  absl::Status CausalConv1dStepSlots(DeviceFloats x, int64_t channels,
                                     int64_t x_stride, DeviceFloats weight,
                                     int64_t kernel_size, DeviceFloats tails,
                                     const DeviceSlotMap& slots,
                                     DeviceFloats out) override;
  absl::Status SsdStepSlots(const kernels::SsdShape& shape, DeviceFloats x,
                            int64_t x_stride, DeviceFloats b, DeviceFloats c,
                            int64_t bc_stride, DeviceFloats dt, DeviceFloats a,
                            DeviceFloats d, DeviceFloats states,
                            const DeviceSlotMap& slots,
                            DeviceFloats y) override;
  absl::Status RopeRotateHalf(DeviceFloats x, int64_t rows, int64_t row_stride,
                              int64_t heads, int64_t head_dim,
                              int64_t start_pos, float base) override;
  absl::Status SiluMul(DeviceFloats gate, int64_t gate_stride,
                       DeviceFloats mult, int64_t mult_stride, int64_t rows,
                       int64_t cols, DeviceFloats out) override;
  // The published shape (F = 16, hd = 64) runs the fused chunk-parallel
  // bf16 kernel (with JRT-RNN's encoder pass when E > 0) on bf16 copies of
  // the inputs; other shapes the feature maps into scratch, then the
  // recurrent featurized form.
  absl::Status LinearAttention(DeviceFloats q, DeviceFloats k, DeviceFloats v,
                               int64_t tokens, DeviceFloats k_enc,
                               DeviceFloats v_enc, int64_t encoder_tokens,
                               const kernels::TaylorAttentionDims& dims,
                               float eps, DeviceFloats kv, DeviceFloats k_sum,
                               DeviceFloats y) override;
  absl::Status WindowAttention(DeviceFloats q, int64_t q_stride, DeviceFloats k,
                               DeviceFloats v,
                               const kernels::WindowAttentionDims& dims,
                               float scale, DeviceFloats out) override;
  absl::Status LinearAttentionStepSlots(
      DeviceFloats q, DeviceFloats k, DeviceFloats v,
      const kernels::TaylorAttentionDims& dims, float eps,
      DeviceFloats kv_states, DeviceFloats k_states, const DeviceSlotMap& slots,
      DeviceFloats y) override;
  absl::Status WindowAttentionStepSlots(
      DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
      float rotary_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
      const DeviceSlotMap& slots, DeviceFloats y) override;

  // ---- paged states and routed rows (cuda_executor_table_ops.cc)
  absl::Status RatChunkScan(DeviceFloats proj, int64_t proj_stride,
                            DeviceFloats gate_bias, const DevicePassRows& rows,
                            int32_t prefill_slot,
                            const kernels::RatPagedDims& dims,
                            const DeviceBlockTable& table, DeviceFloats open,
                            DeviceFloats closed, DeviceFloats q_out,
                            DeviceFloats k_out, DeviceFloats v_out,
                            DeviceFloats z_out) override;
  absl::Status GatherRows(DeviceFloats src, int64_t cols,
                          const DeviceRoutes& routes,
                          DeviceFloats dst) override;
  absl::Status CombineRoutedRows(DeviceFloats base, DeviceFloats routed,
                                 int64_t cols, const DeviceRoutes& routes,
                                 float scale, DeviceFloats x) override;
  absl::Status RouteTopKPairs(DeviceFloats logits, int64_t rows,
                              int64_t experts, int64_t top_k,
                              const StepPadRows& padding,
                              DeviceFloats pair_experts,
                              DeviceFloats pair_gates) override;
  absl::Status RoutedLinear(DeviceFloats x, int64_t x_group,
                            const DeviceMatrixTable& weights,
                            DeviceFloats pair_experts, int64_t pairs,
                            DeviceFloats y) override;
  absl::Status CombineRoutedPairs(DeviceFloats base, DeviceFloats routed,
                                  int64_t cols, int64_t rows, int64_t top_k,
                                  DeviceFloats pair_gates, float scale,
                                  DeviceFloats x) override;
  absl::Status RatPagedAttention(DeviceFloats q, DeviceFloats own_k,
                                 DeviceFloats own_v, DeviceFloats z,
                                 const DevicePassRows& rows,
                                 const kernels::RatPagedDims& dims,
                                 const DeviceBlockTable& table,
                                 DeviceFloats closed, float scale,
                                 DeviceFloats out) override;
  absl::Status RopeRotateHalfAt(DeviceFloats x, int64_t row_stride,
                                int64_t heads, int64_t head_dim,
                                const DeviceSlotMap& step, float base) override;
  absl::Status PagedKvWrite(DeviceFloats k, int64_t k_stride, DeviceFloats v,
                            int64_t v_stride, const DevicePassRows& rows,
                            const kernels::PagedKvDims& dims,
                            const DeviceBlockTable& table, DeviceFloats k_pool,
                            DeviceFloats v_pool) override;
  absl::Status PagedAttention(DeviceFloats q, int64_t q_stride,
                              const DevicePassRows& rows,
                              const kernels::PagedKvDims& dims,
                              const DeviceBlockTable& table,
                              DeviceFloats k_pool, DeviceFloats v_pool,
                              float scale, DeviceFloats y) override;

 private:
  explicit CudaExecutorDevice(int ordinal);
  // Linears' arguments for an input x of `x_size` floats in `rows` rows:
  // every weight has the same columns k (returned), x is [rows, k] and
  // each y [rows, W.rows]; a scale with a bias is UNIMPLEMENTED.
  static absl::StatusOr<int64_t> CheckLinears(
      int64_t x_size, int64_t rows, absl::Span<const LinearOutput> outputs);
  // y (+)= x16 · W^T by `epilogue` (Linears' checks done), padded rows
  // dropped.
  absl::Status Gemm(cuda::DeviceSpan<const cuda::Bf16> x16, int64_t rows,
                    const CudaMatrix& w, DeviceFloats y,
                    const LinearEpilogue& epilogue);
  // Device blocks kept between calls and grown on demand (work on the one
  // stream is ordered, so reuse is safe): `buffer` as at least `count`
  // elements of T.
  template <typename T>
  absl::StatusOr<cuda::DeviceSpan<T>> Kept(cuda::DeviceBuffer& buffer,
                                           int64_t count) {
    if (buffer.bytes() < count * static_cast<int64_t>(sizeof(T))) {
      TWICE_ASSIGN_OR_RETURN(buffer, allocator_.AllocateArray<T>(count));
      ++layout_generation_;  // recorded graphs read the old block
    }
    return cuda::DeviceSpan<T>{static_cast<T*>(buffer.data()), count};
  }
  // bf16 inputs of the GEMMs.
  absl::StatusOr<cuda::DeviceSpan<cuda::Bf16>> Scratch(int64_t count);
  // f32 products of Linear's padded rows (and the padded bias).
  absl::StatusOr<cuda::DeviceSpan<float>> WideOutput(int64_t count);
  // f32 feature maps of the linear attention.
  absl::StatusOr<cuda::DeviceSpan<float>> F32Scratch(int64_t count);

  const std::string name_;
  const int ordinal_;
  // Declaration order is destruction order reversed: the runner and the
  // blocks go before the stream and the allocator they use.
  cuda::DeviceAllocator allocator_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::GemmRunner> gemm_;
  cuda::DeviceBuffer scratch_;
  cuda::DeviceBuffer f32_scratch_;
  cuda::DeviceBuffer wide_output_;
  cuda::DeviceBuffer slot_zero_;              // one int32 0
  bool fused_linear_attention_fits_ = false;  // cuda::FusedLinearAttentionFits
  // Paged attention of few rows splits each row's positions to keep about
  // this many warps busy (cuda/paged_splits.h), partial sums in
  // split_partials_ (sized for any length, so recorded steps keep it).
  int64_t split_warps_ = 0;
  cuda::DeviceBuffer split_partials_;
  cuda::DeviceBuffer route_workspace_;  // RoutedLinear's expert lists
  int64_t layout_generation_ = 0;
  // States and logits to the host: a copy stream and page-locked staging.
  std::unique_ptr<cuda::HostDownloads> downloads_;
  DeviceTraffic traffic_;
};

}  // namespace twice::engine::cuda_executor

#endif  // TWICE_HAVE_CUDA
#endif  // TWICE_ENGINE_EXECUTOR_CUDA_EXECUTOR_DEVICE_H_
