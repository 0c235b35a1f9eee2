// FeedForwardMixer on a device (feed_forward_mixer.h): an MLP in a mixer's
// place (Nemotron-H's "-" layers), x += FFN(h). Rows are independent, so a
// prefill pass and a decode step are the same call, and the state is
// stateless: nothing in the pool, nothing to copy.
#include <memory>
#include <utility>

#include "engine/executor/resident_layers.h"
#include "engine/layers/stateless_state.h"

namespace twice::engine {
namespace {

class ResidentFeedForwardMixer final : public ResidentMixer {
 public:
  explicit ResidentFeedForwardMixer(std::unique_ptr<ResidentFeedForward> ffn)
      : ffn_(std::move(ffn)) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools&) override {
    // The MLP writes this layer's residual.
    ffn_->set_residual_scale(residual_scale());
    return ffn_->Load(dev);
  }
  int64_t ScratchFloats(int64_t rows) const override {
    return ffn_->ScratchFloats(rows);
  }
  int64_t weight_bytes() const override { return ffn_->weight_bytes(); }
  int64_t state_floats_per_slot() const override { return 0; }
  absl::Status ZeroSlot(ExecutorDevice&, int32_t) override {
    return absl::OkStatus();
  }
  absl::Status CheckState(const LayerState& state, int64_t) const override {
    if (dynamic_cast<const StatelessState*>(&state) == nullptr) {
      return absl::FailedPreconditionError(
          "the layer state is not a stateless state");
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice&, const LayerState&, int32_t) override {
    return absl::OkStatus();
  }
  absl::Status AddDownloads(int32_t, int64_t, LayerState&,
                            std::vector<HostCopy>&) override {
    return absl::OkStatus();
  }
  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    return ffn_->Forward(dev, pass, in, scratch, x);
  }

 private:
  std::unique_ptr<ResidentFeedForward> ffn_;
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentFeedForwardMixer(
    std::unique_ptr<ResidentFeedForward> ffn) {
  return std::make_unique<ResidentFeedForwardMixer>(std::move(ffn));
}

}  // namespace twice::engine
