#include "engine/executor/device_fused_swiglu.h"

#include "kernels/status_macros.h"

namespace twice::engine {

absl::Status DeviceFusedSwiGlu::Load(ExecutorDevice& dev) {
  TWICE_ASSIGN_OR_RETURN(input_, dev.UploadMatrix(mlp_.input()));
  TWICE_ASSIGN_OR_RETURN(output_, dev.UploadMatrix(mlp_.output()));
  return absl::OkStatus();
}

int64_t DeviceFusedSwiGlu::weight_bytes() const {
  return input_->bytes() + output_->bytes();
}

absl::Status DeviceFusedSwiGlu::Forward(ExecutorDevice& dev,
                                        const LayerInput& in,
                                        DeviceFloats scratch, DeviceFloats y,
                                        const LinearEpilogue& epilogue) const {
  const int64_t rows = in.rows;
  if (rows == 0) return absl::OkStatus();
  const int64_t hidden = mlp_.hidden();
  const DeviceFloats u = scratch.sub(0, rows * 2 * hidden);
  const DeviceFloats a = scratch.sub(u.size, rows * hidden);
  const LinearOutput input[] = {{input_.get(), u, {}}};
  TWICE_RETURN_IF_ERROR(in.Project(dev, input));
  // The gate is the first half of each row of u, the multiplier the second.
  const MlpActivation act{kernels::MlpActivationKind::kSiluMul,
                          u,
                          2 * hidden,
                          u.sub(hidden, u.size - hidden),
                          2 * hidden,
                          rows,
                          hidden};
  return dev.ActivationLinear(act, a, *output_, y, epilogue);
}

}  // namespace twice::engine
