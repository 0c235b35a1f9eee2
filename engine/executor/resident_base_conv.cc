// BaseConv on a device (base_conv.h has the equations): u = in_proj(h) + b
// [rows, 2C]; a depthwise causal conv over u1 with the slot's tail
// [(K-1)·C]; silu(conv) · u2; x += out_proj(·) + b.
#include <memory>

#include "engine/executor/resident_layers.h"
#include "engine/layers/short_conv_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentBaseConv final : public ResidentMixer {
 public:
  explicit ResidentBaseConv(const BaseConv& mixer)
      : m_(mixer.parameters()), tail_floats_((m_.kernel_size - 1) * m_.inner) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    TWICE_ASSIGN_OR_RETURN(in_proj_, dev.UploadMatrix(m_.in_proj));
    TWICE_ASSIGN_OR_RETURN(out_proj_, dev.UploadMatrix(m_.out_proj));
    TWICE_ASSIGN_OR_RETURN(in_bias_, UploadVector(dev, m_.in_bias.span()));
    TWICE_ASSIGN_OR_RETURN(out_bias_, UploadVector(dev, m_.out_bias.span()));
    TWICE_ASSIGN_OR_RETURN(conv_w_, UploadVector(dev, m_.conv.span()));
    TWICE_ASSIGN_OR_RETURN(tails_, dev.Allocate(pools.slots * tail_floats_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    return rows * 4 * m_.inner;  // u [2C] | conv [C] | gated [C]
  }
  int64_t weight_bytes() const override {
    return in_proj_->bytes() + out_proj_->bytes() + ArrayBytes(*in_bias_) +
           ArrayBytes(*out_bias_) + ArrayBytes(*conv_w_);
  }
  int64_t state_floats_per_slot() const override { return tail_floats_; }

  absl::Status ZeroSlot(ExecutorDevice& dev, int32_t slot) override {
    return dev.Zero(tail_of(slot));
  }
  absl::Status CheckState(const LayerState& state,
                          int64_t /*tokens*/) const override {
    const auto* s = dynamic_cast<const ShortConvState*>(&state);
    if (s == nullptr || s->channels() != m_.inner ||
        s->kernel_size() != m_.kernel_size) {
      return absl::FailedPreconditionError(
          "the layer state is not a matching short_conv state");
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice& dev, const LayerState& state,
                      int32_t slot) override {
    return dev.CopyToDevice(static_cast<const ShortConvState&>(state).tail(),
                            tail_of(slot));
  }
  absl::Status AddDownloads(int32_t slot, int64_t /*tokens*/, LayerState& state,
                            std::vector<HostCopy>& copies) override {
    copies.push_back(
        {tail_of(slot), static_cast<ShortConvState&>(state).tail()});
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows;
    const int64_t c = m_.inner;
    const DeviceFloats u = scratch.sub(0, rows * 2 * c);  // u1 | u2
    const DeviceFloats conv = scratch.sub(u.size, rows * c);
    const DeviceFloats gated = scratch.sub(u.size + conv.size, rows * c);
    const DeviceFloats u1 = u.sub(0, (rows - 1) * 2 * c + c);
    const DeviceFloats u2 = u.sub(c, (rows - 1) * 2 * c + c);
    const LinearOutput in_proj[] = {
        {in_proj_.get(), u, LinearEpilogue{in_bias_->floats(), false}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, in_proj));
    if (pass.step != nullptr) {
      TWICE_RETURN_IF_ERROR(dev.CausalConv1dStepSlots(
          u1, c, 2 * c, conv_w_->floats(), m_.kernel_size, tails_->floats(),
          *pass.step, conv));
    } else {
      TWICE_RETURN_IF_ERROR(dev.CausalConv1dSegments(
          u1, c, 2 * c, conv_w_->floats(), m_.kernel_size, tails_->floats(),
          *pass.segment_rows, conv));
    }
    TWICE_RETURN_IF_ERROR(dev.SiluMul(conv, c, u2, 2 * c, rows, c, gated));
    return dev.Linear(gated, rows, *out_proj_, x,
                      ResidualAdd(out_bias_->floats()));
  }

 private:
  DeviceFloats tail_of(int32_t slot) const {
    return tails_->floats().sub(slot * tail_floats_, tail_floats_);
  }

  const BaseConv::Parameters m_;
  const int64_t tail_floats_;
  std::unique_ptr<DeviceMatrix> in_proj_, out_proj_;
  std::unique_ptr<DeviceArray> in_bias_, out_bias_, conv_w_;
  std::unique_ptr<DeviceArray> tails_;  // [slots, (K-1)·C]
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentBaseConv(const BaseConv& m) {
  return std::make_unique<ResidentBaseConv>(m);
}

}  // namespace twice::engine
