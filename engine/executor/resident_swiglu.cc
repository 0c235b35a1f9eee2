// The SwiGLU MLPs on a device:
//   SwiGluMlp (swiglu_mlp.h)  u = h · fc1^T [rows, 2I];
//                             a = u[:, :I] · silu(u[:, I:]); x += a · fc2^T
//   LlamaMlp (llama_mlp.h)    g = h · gate^T, u = h · up^T [rows, I];
//                             a = silu(g) · u; x += a · down^T
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
  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& /*pass*/,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = in.rows;
    const int64_t hidden = mlp_.hidden();
    const DeviceFloats u = scratch.sub(0, rows * 2 * hidden);
    const DeviceFloats a = scratch.sub(u.size, rows * hidden);
    const LinearOutput fc1[] = {{fc1_.get(), u, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, fc1));
    // SwiGlu: the second half of each row of u gates the first.
    const MlpActivation act{kernels::MlpActivationKind::kSiluMul,
                            u.sub(hidden, u.size - hidden),
                            2 * hidden,
                            u,
                            2 * hidden,
                            rows,
                            hidden};
    return dev.ActivationLinear(act, a, *fc2_, x, ResidualAdd());
  }

 private:
  const SwiGluMlp& mlp_;
  std::unique_ptr<DeviceMatrix> fc1_, fc2_;
};

class ResidentLlamaMlp final : public ResidentFeedForward {
 public:
  explicit ResidentLlamaMlp(const LlamaMlp& mlp) : mlp_(mlp) {}

  absl::Status Load(ExecutorDevice& dev) override {
    TWICE_ASSIGN_OR_RETURN(gate_, dev.UploadMatrix(mlp_.gate()));
    TWICE_ASSIGN_OR_RETURN(up_, dev.UploadMatrix(mlp_.up()));
    TWICE_ASSIGN_OR_RETURN(down_, dev.UploadMatrix(mlp_.down()));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    return rows * 3 * mlp_.hidden();  // g | u | a
  }
  int64_t weight_bytes() const override {
    return gate_->bytes() + up_->bytes() + down_->bytes();
  }
  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& /*pass*/,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = in.rows;
    const int64_t hidden = mlp_.hidden();
    const DeviceFloats g = scratch.sub(0, rows * hidden);
    const DeviceFloats u = scratch.sub(g.size, rows * hidden);
    const DeviceFloats a = scratch.sub(g.size + u.size, rows * hidden);
    const LinearOutput gate_up[] = {{gate_.get(), g, {}}, {up_.get(), u, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, gate_up));
    const MlpActivation act{kernels::MlpActivationKind::kSiluMul,
                            g,
                            hidden,
                            u,
                            hidden,
                            rows,
                            hidden};
    return dev.ActivationLinear(act, a, *down_, x, ResidualAdd());
  }

 private:
  const LlamaMlp& mlp_;
  std::unique_ptr<DeviceMatrix> gate_, up_, down_;
};

}  // namespace

std::unique_ptr<ResidentFeedForward> NewResidentLlamaMlp(const LlamaMlp& m) {
  return std::make_unique<ResidentLlamaMlp>(m);
}

std::unique_ptr<ResidentFeedForward> NewResidentSwiGlu(const SwiGluMlp& m) {
  return std::make_unique<ResidentSwiGlu>(m);
}

}  // namespace twice::engine
