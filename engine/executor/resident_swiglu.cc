// SwiGluMlp on a device (swiglu_mlp.h): u = h · fc1^T [rows, 2I];
// a = u[:, :I] · silu(u[:, I:]); x += a · fc2^T.
#include <memory>

#include "engine/executor/resident_layers.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentSwiGlu final : public ResidentFeedForward {
 public:
  explicit ResidentSwiGlu(const SwiGluMlp& mlp) : mlp_(mlp) {}

  absl::Status Load(ExecutorDevice& dev) override {
    TWICE_ASSIGN_OR_RETURN(fc1_, dev.UploadMatrix(mlp_.fc1()));
    TWICE_ASSIGN_OR_RETURN(fc2_, dev.UploadMatrix(mlp_.fc2()));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    return rows * 3 * mlp_.hidden();  // u [2I] | a [I]
  }
  int64_t weight_bytes() const override {
    return fc1_->bytes() + fc2_->bytes();
  }
  absl::Status Forward(ExecutorDevice& dev, int64_t rows, DeviceFloats h,
                       DeviceFloats scratch, DeviceFloats x) override {
    const int64_t hidden = mlp_.hidden();
    const DeviceFloats u = scratch.sub(0, rows * 2 * hidden);
    const DeviceFloats a = scratch.sub(u.size, rows * hidden);
    TWICE_RETURN_IF_ERROR(dev.Linear(h, rows, *fc1_, u));
    TWICE_RETURN_IF_ERROR(dev.SwiGlu(u, rows, hidden, a));
    return dev.Linear(a, rows, *fc2_, x, LinearEpilogue{{}, true});
  }

 private:
  const SwiGluMlp& mlp_;
  std::unique_ptr<DeviceMatrix> fc1_, fc2_;
};

}  // namespace

std::unique_ptr<ResidentFeedForward> NewResidentSwiGlu(const SwiGluMlp& m) {
  return std::make_unique<ResidentSwiGlu>(m);
}

}  // namespace twice::engine
