// An ExecutorDevice that runs every operation on another device (the CPU
// device in the tests) and makes a chosen call fail: the failures of a
// real GPU (an allocation refused, a kernel or a copy that faults) at a
// chosen point of a read or a step, so that the executor's promises about
// them can be checked on any machine: a call refused before anything ran
// changes nothing, one that fails after the states moved marks them
// damaged.
#ifndef TWICE_TESTS_ENGINE_FAULTY_EXECUTOR_DEVICE_H_
#define TWICE_TESTS_ENGINE_FAULTY_EXECUTOR_DEVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/executor/executor_device.h"
#include "kernels/status_macros.h"

namespace twice::engine::testing {

// The plan of failures and the count of calls per operation, shared by the
// test and the device it gave away.
class DeviceFaults {
 public:
  // The `nth` call (1 = the next one) of `op` from now on answers `error`
  // instead of running; one planned failure at a time.
  void FailCall(std::string op, int64_t nth, absl::Status error) {
    std::lock_guard<std::mutex> lock(mu_);
    op_ = std::move(op);
    left_ = nth;
    error_ = std::move(error);
  }
  // Calls of `op` so far, the failed one included.
  int64_t calls(std::string_view op) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(std::string(op));
    return it == calls_.end() ? 0 : it->second;
  }
  // Whether the planned failure has happened.
  bool fired() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fired_;
  }
  // Counts a call of `op`; the planned error when it is this one.
  absl::Status Check(std::string_view op) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_[std::string(op)];
    if (left_ > 0 && op == op_ && --left_ == 0) {
      fired_ = true;
      return error_;
    }
    return absl::OkStatus();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> calls_;
  std::string op_;
  int64_t left_ = 0;
  absl::Status error_;
  bool fired_ = false;
};

class FaultyExecutorDevice final : public ExecutorDevice {
 public:
  FaultyExecutorDevice(std::unique_ptr<ExecutorDevice> inner,
                       std::shared_ptr<DeviceFaults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}

  std::string name() const override { return inner_->name(); }
  absl::Status MakeCurrent() override {
    TWICE_RETURN_IF_ERROR(faults_->Check("MakeCurrent"));
    return inner_->MakeCurrent();
  }
  DeviceTraffic traffic() const override { return inner_->traffic(); }
  absl::StatusOr<std::unique_ptr<DeviceArray>> Allocate(
      int64_t floats) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Allocate"));
    return inner_->Allocate(floats);
  }
  absl::Status Zero(DeviceFloats x) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Zero"));
    return inner_->Zero(x);
  }
  absl::Status CopyToDevice(absl::Span<const float> host,
                            DeviceFloats device) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CopyToDevice"));
    return inner_->CopyToDevice(host, device);
  }
  absl::Status CopyAllToHost(absl::Span<const HostCopy> copies) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CopyAllToHost"));
    return inner_->CopyAllToHost(copies);
  }
  absl::StatusOr<std::unique_ptr<DeviceSlotMap>> UploadSlotMap(
      absl::Span<const int32_t> slots,
      absl::Span<const int64_t> positions) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("UploadSlotMap"));
    return inner_->UploadSlotMap(slots, positions);
  }
  absl::Status CopyRows(DeviceFloats src, int64_t src_stride, DeviceFloats dst,
                        int64_t dst_stride, int64_t rows,
                        int64_t cols) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CopyRows"));
    return inner_->CopyRows(src, src_stride, dst, dst_stride, rows, cols);
  }
  absl::StatusOr<std::unique_ptr<DeviceBlockTable>> UploadBlockTable(
      absl::Span<const int32_t> table, int64_t width) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("UploadBlockTable"));
    return inner_->UploadBlockTable(table, width);
  }
  absl::Status FillBlockTable(DeviceBlockTable& table,
                              absl::Span<const int32_t> rows,
                              int64_t width) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("FillBlockTable"));
    return inner_->FillBlockTable(table, rows, width);
  }
  absl::StatusOr<std::unique_ptr<DeviceRoutes>> UploadRoutes(
      kernels::TopKRoutes routes) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("UploadRoutes"));
    return inner_->UploadRoutes(routes);
  }
  absl::StatusOr<std::unique_ptr<DeviceMatrix>> UploadMatrix(
      const kernels::Tensor& weight) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("UploadMatrix"));
    return inner_->UploadMatrix(weight);
  }
  absl::Status Synchronize() override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Synchronize"));
    return inner_->Synchronize();
  }
  absl::StatusOr<std::unique_ptr<DeviceStep>> NewStep(int64_t rows) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("NewStep"));
    return inner_->NewStep(rows);
  }
  absl::Status FillStep(
      DeviceStep& step, absl::Span<const int32_t> ids,
      absl::Span<const int32_t> slots, absl::Span<const int64_t> positions,
      absl::Span<const kernels::SamplingRule> rules) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("FillStep"));
    return inner_->FillStep(step, ids, slots, positions, rules);
  }
  absl::Status EmbedStep(const DeviceStep& step, const DeviceMatrix& table,
                         float scale, DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("EmbedStep"));
    return inner_->EmbedStep(step, table, scale, out);
  }
  absl::Status SampleStep(DeviceFloats logits, int64_t row_stride,
                          int64_t vocab, DeviceStep& step) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("SampleStep"));
    return inner_->SampleStep(logits, row_stride, vocab, step);
  }
  absl::Status CopyStepIds(const DeviceStep& step,
                           absl::Span<int32_t> ids) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CopyStepIds"));
    return inner_->CopyStepIds(step, ids);
  }
  bool records_graphs() const override { return inner_->records_graphs(); }
  absl::StatusOr<std::unique_ptr<DeviceGraph>> Capture(
      absl::FunctionRef<absl::Status()> work) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Capture"));
    return inner_->Capture(work);
  }
  absl::Status Launch(const DeviceGraph& graph) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Launch"));
    return inner_->Launch(graph);
  }
  int64_t layout_generation() const override {
    return inner_->layout_generation();
  }
  absl::Status Embedding(absl::Span<const int32_t> ids,
                         const DeviceMatrix& table, float scale,
                         DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Embedding"));
    return inner_->Embedding(ids, table, scale, out);
  }
  absl::Status RmsNorm(DeviceFloats x, int64_t rows, int64_t dim,
                       DeviceFloats weight, float eps,
                       DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RmsNorm"));
    return inner_->RmsNorm(x, rows, dim, weight, eps, y);
  }
  absl::Status Linear(DeviceFloats x, int64_t rows, const DeviceMatrix& weight,
                      DeviceFloats y, const LinearEpilogue& epilogue) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Linear"));
    return inner_->Linear(x, rows, weight, y, epilogue);
  }
  absl::Status Linears(DeviceFloats x, int64_t rows,
                       absl::Span<const LinearOutput> outputs) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("Linears"));
    return inner_->Linears(x, rows, outputs);
  }
  absl::Status RmsNormLinears(DeviceFloats x, int64_t rows, int64_t dim,
                              DeviceFloats weight, float eps, DeviceFloats y,
                              absl::Span<const LinearOutput> outputs) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RmsNormLinears"));
    return inner_->RmsNormLinears(x, rows, dim, weight, eps, y, outputs);
  }
  absl::Status ActivationLinear(const MlpActivation& act, DeviceFloats a,
                                const DeviceMatrix& weight, DeviceFloats y,
                                const LinearEpilogue& epilogue) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("ActivationLinear"));
    return inner_->ActivationLinear(act, a, weight, y, epilogue);
  }
  absl::Status CausalConv1d(DeviceFloats x, int64_t tokens, int64_t channels,
                            int64_t x_stride, DeviceFloats weight,
                            int64_t kernel_size, DeviceFloats tail,
                            DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CausalConv1d"));
    return inner_->CausalConv1d(x, tokens, channels, x_stride, weight,
                                kernel_size, tail, out);
  }
  absl::Status BiasSiluRows(DeviceFloats x, int64_t rows,
                            DeviceFloats bias) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("BiasSiluRows"));
    return inner_->BiasSiluRows(x, rows, bias);
  }
  absl::Status SoftplusBiasRows(DeviceFloats raw, int64_t rows, int64_t stride,
                                DeviceFloats bias, DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("SoftplusBiasRows"));
    return inner_->SoftplusBiasRows(raw, rows, stride, bias, out);
  }
  absl::Status GatedGroupRmsNorm(DeviceFloats z, int64_t z_stride,
                                 DeviceFloats y, int64_t rows, int64_t width,
                                 int64_t groups, DeviceFloats weight,
                                 double eps, DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("GatedGroupRmsNorm"));
    return inner_->GatedGroupRmsNorm(z, z_stride, y, rows, width, groups,
                                     weight, eps, out);
  }
  absl::Status SsdChunkScan(const kernels::SsdShape& shape, int64_t tokens,
                            int64_t chunk, DeviceFloats x, int64_t x_stride,
                            DeviceFloats b, DeviceFloats c, int64_t bc_stride,
                            DeviceFloats dt, DeviceFloats a, DeviceFloats d,
                            DeviceFloats state, DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("SsdChunkScan"));
    return inner_->SsdChunkScan(shape, tokens, chunk, x, x_stride, b, c,
                                bc_stride, dt, a, d, state, y);
  }
  absl::StatusOr<std::unique_ptr<DevicePassSegments>> UploadPassSegments(
      absl::Span<const kernels::PassSegment> segments, int64_t rows,
      int64_t slots) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("UploadPassSegments"));
    return inner_->UploadPassSegments(segments, rows, slots);
  }
  absl::Status CausalConv1dSegments(DeviceFloats x, int64_t channels,
                                    int64_t x_stride, DeviceFloats weight,
                                    int64_t kernel_size, DeviceFloats tails,
                                    const DevicePassSegments& segments,
                                    DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CausalConv1dSegments"));
    return inner_->CausalConv1dSegments(x, channels, x_stride, weight,
                                        kernel_size, tails, segments, out);
  }
  absl::Status SsdChunkScanSegments(
      const kernels::SsdShape& shape, int64_t chunk, DeviceFloats x,
      int64_t x_stride, DeviceFloats b, DeviceFloats c, int64_t bc_stride,
      DeviceFloats dt, DeviceFloats a, DeviceFloats d, DeviceFloats states,
      const DevicePassSegments& segments, DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("SsdChunkScanSegments"));
    return inner_->SsdChunkScanSegments(shape, chunk, x, x_stride, b, c,
                                        bc_stride, dt, a, d, states, segments,
                                        y);
  }
  absl::Status LinearAttentionSegments(DeviceFloats q, DeviceFloats k,
                                       DeviceFloats v,
                                       const kernels::TaylorAttentionDims& dims,
                                       float eps, DeviceFloats kv_states,
                                       DeviceFloats k_states,
                                       const DevicePassSegments& segments,
                                       DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("LinearAttentionSegments"));
    return inner_->LinearAttentionSegments(q, k, v, dims, eps, kv_states,
                                           k_states, segments, y);
  }
  absl::Status WindowAttentionSegments(DeviceFloats qkv, int64_t qkv_stride,
                                       const kernels::WindowStepDims& dims,
                                       float rope_base, float scale,
                                       DeviceFloats ring_k, DeviceFloats ring_v,
                                       const DevicePassSegments& segments,
                                       DeviceFloats context,
                                       DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("WindowAttentionSegments"));
    return inner_->WindowAttentionSegments(qkv, qkv_stride, dims, rope_base,
                                           scale, ring_k, ring_v, segments,
                                           context, y);
  }
  absl::Status CausalConv1dStepSlots(DeviceFloats x, int64_t channels,
                                     int64_t x_stride, DeviceFloats weight,
                                     int64_t kernel_size, DeviceFloats tails,
                                     const DeviceSlotMap& slots,
                                     DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CausalConv1dStepSlots"));
    return inner_->CausalConv1dStepSlots(x, channels, x_stride, weight,
                                         kernel_size, tails, slots, out);
  }
  absl::Status SsdStepSlots(const kernels::SsdShape& shape, DeviceFloats x,
                            int64_t x_stride, DeviceFloats b, DeviceFloats c,
                            int64_t bc_stride, DeviceFloats dt, DeviceFloats a,
                            DeviceFloats d, DeviceFloats states,
                            const DeviceSlotMap& slots,
                            DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("SsdStepSlots"));
    return inner_->SsdStepSlots(shape, x, x_stride, b, c, bc_stride, dt, a, d,
                                states, slots, y);
  }
  absl::Status RopeRotateHalf(DeviceFloats x, int64_t rows, int64_t row_stride,
                              int64_t heads, int64_t head_dim,
                              int64_t start_pos, float base) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RopeRotateHalf"));
    return inner_->RopeRotateHalf(x, rows, row_stride, heads, head_dim,
                                  start_pos, base);
  }
  absl::Status RopeRotateHalfAt(DeviceFloats x, int64_t row_stride,
                                int64_t heads, int64_t head_dim,
                                const DeviceSlotMap& step,
                                float base) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RopeRotateHalfAt"));
    return inner_->RopeRotateHalfAt(x, row_stride, heads, head_dim, step, base);
  }
  absl::Status PagedKvWrite(DeviceFloats k, int64_t k_stride, DeviceFloats v,
                            int64_t v_stride, const DevicePassRows& rows,
                            const kernels::PagedKvDims& dims,
                            const DeviceBlockTable& table, DeviceFloats k_pool,
                            DeviceFloats v_pool) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("PagedKvWrite"));
    return inner_->PagedKvWrite(k, k_stride, v, v_stride, rows, dims, table,
                                k_pool, v_pool);
  }
  absl::Status PagedAttention(DeviceFloats q, int64_t q_stride,
                              const DevicePassRows& rows,
                              const kernels::PagedKvDims& dims,
                              const DeviceBlockTable& table,
                              DeviceFloats k_pool, DeviceFloats v_pool,
                              float scale, DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("PagedAttention"));
    return inner_->PagedAttention(q, q_stride, rows, dims, table, k_pool,
                                  v_pool, scale, y);
  }
  absl::Status SiluMul(DeviceFloats gate, int64_t gate_stride,
                       DeviceFloats mult, int64_t mult_stride, int64_t rows,
                       int64_t cols, DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("SiluMul"));
    return inner_->SiluMul(gate, gate_stride, mult, mult_stride, rows, cols,
                           out);
  }
  absl::Status GatherRows(DeviceFloats src, int64_t cols,
                          const DeviceRoutes& routes,
                          DeviceFloats dst) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("GatherRows"));
    return inner_->GatherRows(src, cols, routes, dst);
  }
  absl::Status CombineRoutedRows(DeviceFloats base, DeviceFloats routed,
                                 int64_t cols, const DeviceRoutes& routes,
                                 float scale, DeviceFloats x) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CombineRoutedRows"));
    return inner_->CombineRoutedRows(base, routed, cols, routes, scale, x);
  }
  absl::StatusOr<std::unique_ptr<DeviceMatrixTable>> UploadMatrixTable(
      absl::Span<const DeviceMatrix* const> matrices) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("UploadMatrixTable"));
    return inner_->UploadMatrixTable(matrices);
  }
  absl::Status RouteTopKPairs(DeviceFloats logits, int64_t rows,
                              int64_t experts, int64_t top_k,
                              const StepPadRows& padding,
                              DeviceFloats pair_experts,
                              DeviceFloats pair_gates) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RouteTopKPairs"));
    return inner_->RouteTopKPairs(logits, rows, experts, top_k, padding,
                                  pair_experts, pair_gates);
  }
  absl::Status RoutedLinear(DeviceFloats x, int64_t x_group,
                            const DeviceMatrixTable& weights,
                            DeviceFloats pair_experts, int64_t pairs,
                            DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RoutedLinear"));
    return inner_->RoutedLinear(x, x_group, weights, pair_experts, pairs, y);
  }
  absl::Status CombineRoutedPairs(DeviceFloats base, DeviceFloats routed,
                                  int64_t cols, int64_t rows, int64_t top_k,
                                  DeviceFloats pair_gates, float scale,
                                  DeviceFloats x) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("CombineRoutedPairs"));
    return inner_->CombineRoutedPairs(base, routed, cols, rows, top_k,
                                      pair_gates, scale, x);
  }
  absl::Status RatChunkScan(DeviceFloats proj, int64_t proj_stride,
                            DeviceFloats gate_bias, const DevicePassRows& rows,
                            int32_t prefill_slot,
                            const kernels::RatPagedDims& dims,
                            const DeviceBlockTable& table, DeviceFloats open,
                            DeviceFloats closed, DeviceFloats q_out,
                            DeviceFloats k_out, DeviceFloats v_out,
                            DeviceFloats z_out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RatChunkScan"));
    return inner_->RatChunkScan(proj, proj_stride, gate_bias, rows,
                                prefill_slot, dims, table, open, closed, q_out,
                                k_out, v_out, z_out);
  }
  absl::Status RatChunkScanSegments(
      DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
      const DevicePassSegments& segments, const kernels::RatPagedDims& dims,
      const DeviceBlockTable& row_table, DeviceFloats open, DeviceFloats closed,
      DeviceFloats q_out, DeviceFloats k_out, DeviceFloats v_out,
      DeviceFloats z_out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RatChunkScanSegments"));
    return inner_->RatChunkScanSegments(proj, proj_stride, gate_bias, segments,
                                        dims, row_table, open, closed, q_out,
                                        k_out, v_out, z_out);
  }
  absl::Status RatPagedAttention(DeviceFloats q, DeviceFloats own_k,
                                 DeviceFloats own_v, DeviceFloats z,
                                 const DevicePassRows& rows,
                                 const kernels::RatPagedDims& dims,
                                 const DeviceBlockTable& table,
                                 DeviceFloats closed, float scale,
                                 DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("RatPagedAttention"));
    return inner_->RatPagedAttention(q, own_k, own_v, z, rows, dims, table,
                                     closed, scale, out);
  }
  absl::Status LinearAttention(DeviceFloats q, DeviceFloats k, DeviceFloats v,
                               int64_t tokens, DeviceFloats k_enc,
                               DeviceFloats v_enc, int64_t encoder_tokens,
                               const kernels::TaylorAttentionDims& dims,
                               float eps, DeviceFloats kv, DeviceFloats k_sum,
                               DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("LinearAttention"));
    return inner_->LinearAttention(q, k, v, tokens, k_enc, v_enc,
                                   encoder_tokens, dims, eps, kv, k_sum, y);
  }
  absl::Status WindowAttention(DeviceFloats q, int64_t q_stride, DeviceFloats k,
                               DeviceFloats v,
                               const kernels::WindowAttentionDims& dims,
                               float scale, DeviceFloats out) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("WindowAttention"));
    return inner_->WindowAttention(q, q_stride, k, v, dims, scale, out);
  }
  absl::Status LinearAttentionStepSlots(
      DeviceFloats q, DeviceFloats k, DeviceFloats v,
      const kernels::TaylorAttentionDims& dims, float eps,
      DeviceFloats kv_states, DeviceFloats k_states, const DeviceSlotMap& slots,
      DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("LinearAttentionStepSlots"));
    return inner_->LinearAttentionStepSlots(q, k, v, dims, eps, kv_states,
                                            k_states, slots, y);
  }
  absl::Status WindowAttentionStepSlots(
      DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
      float rotary_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
      const DeviceSlotMap& slots, DeviceFloats y) override {
    TWICE_RETURN_IF_ERROR(faults_->Check("WindowAttentionStepSlots"));
    return inner_->WindowAttentionStepSlots(qkv, qkv_stride, dims, rotary_base,
                                            scale, ring_k, ring_v, slots, y);
  }

 private:
  std::unique_ptr<ExecutorDevice> inner_;
  std::shared_ptr<DeviceFaults> faults_;
};

}  // namespace twice::engine::testing

#endif  // TWICE_TESTS_ENGINE_FAULTY_EXECUTOR_DEVICE_H_
