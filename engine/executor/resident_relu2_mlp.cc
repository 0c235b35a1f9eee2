// Relu2Mlp on a device (relu2_mlp.h): u = h · up^T [rows, I];
// u = relu(u)^2; x += u · down^T.
#include <memory>

#include "engine/executor/resident_layers.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentRelu2Mlp final : public ResidentFeedForward {
 public:
  explicit ResidentRelu2Mlp(const Relu2Mlp& mlp) : mlp_(mlp) {}

  absl::Status Load(ExecutorDevice& dev) override {
    TWICE_ASSIGN_OR_RETURN(up_, dev.UploadMatrix(mlp_.up()));
    TWICE_ASSIGN_OR_RETURN(down_, dev.UploadMatrix(mlp_.down()));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    return rows * mlp_.hidden();
  }
  int64_t weight_bytes() const override {
    return up_->bytes() + down_->bytes();
  }
  absl::Status Forward(ExecutorDevice& dev, int64_t rows, DeviceFloats h,
                       DeviceFloats scratch, DeviceFloats x) override {
    const DeviceFloats u = scratch.sub(0, rows * mlp_.hidden());
    TWICE_RETURN_IF_ERROR(dev.Linear(h, rows, *up_, u));
    TWICE_RETURN_IF_ERROR(dev.ReluSquared(u));
    return dev.Linear(u, rows, *down_, x, LinearEpilogue{{}, true});
  }

 private:
  const Relu2Mlp& mlp_;
  std::unique_ptr<DeviceMatrix> up_, down_;
};

}  // namespace

std::unique_ptr<ResidentFeedForward> NewResidentRelu2Mlp(const Relu2Mlp& m) {
  return std::make_unique<ResidentRelu2Mlp>(m);
}

}  // namespace twice::engine
