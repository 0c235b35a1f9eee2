// The CUDA executor device's decode-step buffers and recorded graphs
// (cuda_executor_device.h): a step's inputs go up in one copy into a block
// that stays put, the embedding and the sampling read them there, and a
// stream capture of the step's work replays as one graph launch.
#include "engine/executor/executor_device.h"

#if TWICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/executor/cuda_executor_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/status_macros.h"

namespace twice::engine::cuda_executor {
namespace {

class CudaGraph final : public DeviceGraph {
 public:
  explicit CudaGraph(cudaGraphExec_t exec) : exec_(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

absl::Status CheckFilled(const DeviceStep& step, const char* op) {
  if (static_cast<int64_t>(step.token_ids().size()) != step.rows()) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, ": the step is not filled"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceStep>> CudaExecutorDevice::NewStep(
    int64_t rows) {
  if (rows < 1 || rows >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError("NewStep: need 1 <= rows < 2^31");
  }
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer block,
                         allocator_.Allocate(CudaStep::BlockBytes(rows)));
  return std::unique_ptr<DeviceStep>(
      std::make_unique<CudaStep>(rows, std::move(block)));
}

absl::Status CudaExecutorDevice::FillStep(
    DeviceStep& step, absl::Span<const int32_t> ids,
    absl::Span<const int32_t> slots, absl::Span<const int64_t> positions,
    absl::Span<const kernels::SamplingRule> rules) {
  const int64_t rows = step.rows();
  TWICE_RETURN_IF_ERROR(CheckStepInputs(rows, ids, slots, positions, rules));
  auto& s = static_cast<CudaStep&>(step);
  // Everything before the sampled ids, in the block's layout, in one copy.
  std::vector<char> packed(static_cast<size_t>(CudaStep::SampledOffset(rows)));
  std::memcpy(packed.data(), positions.data(), rows * sizeof(int64_t));
  std::memcpy(packed.data() + rows * sizeof(int64_t), slots.data(),
              rows * sizeof(int32_t));
  std::memcpy(packed.data() + CudaStep::IdsOffset(rows), ids.data(),
              rows * sizeof(int32_t));
  cuda::PackSamplingRules(rules, packed.data() + CudaStep::RulesOffset(rows));
  const int64_t bytes = static_cast<int64_t>(packed.size());
  TWICE_RETURN_IF_ERROR(stream_->Upload(packed.data(), s.block(), bytes));
  traffic_.bytes_to_device += bytes;
  s.Refill(ids, slots, positions);
  return absl::OkStatus();
}

absl::Status CudaExecutorDevice::EmbedStep(const DeviceStep& step,
                                           const DeviceMatrix& table,
                                           float scale, DeviceFloats out) {
  TWICE_RETURN_IF_ERROR(CheckFilled(step, "EmbedStep"));
  // The ids are read on the device: checked here, on their host copy.
  for (const int32_t id : step.token_ids()) {
    if (id < 0 || id >= table.rows()) {
      return absl::InvalidArgumentError(
          "EmbedStep: token id outside the vocabulary");
    }
  }
  return cuda::EmbeddingOfDeviceIds(
      *stream_, static_cast<const CudaStep&>(step).device_ids(),
      MatrixOf(table).values(), table.rows(), table.cols(), scale, Span(out));
}

absl::Status CudaExecutorDevice::SampleStep(DeviceFloats logits,
                                            int64_t row_stride, int64_t vocab,
                                            DeviceStep& step) {
  TWICE_RETURN_IF_ERROR(CheckFilled(step, "SampleStep"));
  const auto& s = static_cast<const CudaStep&>(step);
  return cuda::SampleRowsOfDeviceRules(*stream_, ConstSpan(logits), s.rows(),
                                       row_stride, vocab, s.device_rules(),
                                       s.device_sampled());
}

absl::Status CudaExecutorDevice::CopyStepIds(const DeviceStep& step,
                                             absl::Span<int32_t> ids) {
  if (static_cast<int64_t>(ids.size()) != step.rows()) {
    return absl::InvalidArgumentError("CopyStepIds: one id per row");
  }
  const int64_t bytes = step.rows() * static_cast<int64_t>(sizeof(int32_t));
  traffic_.bytes_to_host += bytes;
  const HostWaitTimer wait(traffic_);
  return cuda::CopyToHost(
      static_cast<const CudaStep&>(step).device_sampled().data, ids.data(),
      bytes, stream_->get());
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> CudaExecutorDevice::Capture(
    absl::FunctionRef<absl::Status()> work) {
  // Thread-local: a call on this thread that could wait for the device or
  // allocate fails the capture instead of running.
  TWICE_CUDA_RETURN_IF_ERROR(
      cudaStreamBeginCapture(stream_->get(), cudaStreamCaptureModeThreadLocal));
  const absl::Status recorded = work();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_->get(), &graph);
  (void)cudaGetLastError();  // a failed capture's error is not sticky
  if (!recorded.ok() || ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!recorded.ok()) return recorded;
    return cuda::CudaStatus(ended, "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  TWICE_CUDA_RETURN_IF_ERROR(made);
  return std::unique_ptr<DeviceGraph>(std::make_unique<CudaGraph>(exec));
}

absl::Status CudaExecutorDevice::Launch(const DeviceGraph& graph) {
  TWICE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(
      static_cast<const CudaGraph&>(graph).get(), stream_->get()));
  ++traffic_.graph_launches;
  return absl::OkStatus();
}

}  // namespace twice::engine::cuda_executor
#endif  // TWICE_HAVE_CUDA
