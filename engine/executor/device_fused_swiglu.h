// DeviceFusedSwiGlu: a FusedSwiGluMlp's weights on a device and its
// forward, y (+)= (silu(g) · a) · output^T with [g | a] = h · input^T (gate
// columns first), into whatever output and epilogue the caller gives: the
// residual stream for Granite-4.0-H's dense MLP, a block of expert rows or
// the shared expert's sum for its mixture of experts.
#ifndef TWICE_ENGINE_EXECUTOR_DEVICE_FUSED_SWIGLU_H_
#define TWICE_ENGINE_EXECUTOR_DEVICE_FUSED_SWIGLU_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/resident_layer.h"
#include "engine/layers/fused_swiglu_mlp.h"

namespace twice::engine {

class DeviceFusedSwiGlu {
 public:
  // `mlp` must outlive this.
  explicit DeviceFusedSwiGlu(const FusedSwiGluMlp& mlp) : mlp_(mlp) {}

  [[nodiscard]] absl::Status Load(ExecutorDevice& device);
  int64_t ScratchFloats(int64_t rows) const { return rows * 3 * mlp_.hidden(); }
  int64_t weight_bytes() const;
  int64_t hidden() const { return mlp_.hidden(); }
  // The loaded weights: input [2 · hidden, d] (gate rows first), output
  // [d, hidden].
  const DeviceMatrix& input() const { return *input_; }
  const DeviceMatrix& output() const { return *output_; }
  // y [rows, d] (+)= the MLP of h [rows, d] made of `in`, by `epilogue`.
  [[nodiscard]] absl::Status Forward(ExecutorDevice& device,
                                     const LayerInput& in, DeviceFloats scratch,
                                     DeviceFloats y,
                                     const LinearEpilogue& epilogue) const;

 private:
  const FusedSwiGluMlp& mlp_;
  std::unique_ptr<DeviceMatrix> input_, output_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_DEVICE_FUSED_SWIGLU_H_
