// The non-gated MLPs on a device: u = h · up^T [rows, I]; u = act(u);
// x += u · down^T, with
//   Relu2Mlp (relu2_mlp.h, Nemotron-H)  act = relu(u)^2
//   GeluMlp (gelu_mlp.h, RAT)           act = exact (erf) GELU
#include <memory>

#include "engine/executor/resident_layers.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentPlainMlp final : public ResidentFeedForward {
 public:
  ResidentPlainMlp(const Tensor& up, const Tensor& down, int64_t hidden,
                   kernels::MlpActivationKind activation)
      : up_w_(up), down_w_(down), hidden_(hidden), activation_(activation) {}

  absl::Status Load(ExecutorDevice& dev) override {
    TWICE_ASSIGN_OR_RETURN(up_, dev.UploadMatrix(up_w_));
    TWICE_ASSIGN_OR_RETURN(down_, dev.UploadMatrix(down_w_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override { return rows * hidden_; }
  int64_t weight_bytes() const override {
    return up_->bytes() + down_->bytes();
  }
  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& /*pass*/,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = in.rows;
    const DeviceFloats u = scratch.sub(0, rows * hidden_);
    const LinearOutput up[] = {{up_.get(), u, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, up));
    // In place: the activation's rows are u's.
    const MlpActivation act{activation_, u, hidden_, {}, 0, rows, hidden_};
    return dev.ActivationLinear(act, u, *down_, x, ResidualAdd());
  }

 private:
  const Tensor& up_w_;
  const Tensor& down_w_;
  const int64_t hidden_;
  const kernels::MlpActivationKind activation_;
  std::unique_ptr<DeviceMatrix> up_, down_;
};

}  // namespace

std::unique_ptr<ResidentFeedForward> NewResidentRelu2Mlp(const Relu2Mlp& m) {
  return std::make_unique<ResidentPlainMlp>(
      m.up(), m.down(), m.hidden(), kernels::MlpActivationKind::kReluSquared);
}

std::unique_ptr<ResidentFeedForward> NewResidentGeluMlp(const GeluMlp& m) {
  return std::make_unique<ResidentPlainMlp>(m.fc1(), m.fc2(), m.hidden(),
                                            kernels::MlpActivationKind::kGelu);
}

}  // namespace twice::engine
