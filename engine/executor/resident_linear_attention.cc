// BasedLinearAttention on a device (based_linear_attention.h has the
// equations): q, k = h · Wq^T, h · Wk^T [rows, H·F], v = h · Wv^T; the
// Taylor feature map and the causal linear attention over the slot's
// S [H, hd, D] and z [H, D]; x += y · Wo^T.
#include <memory>

#include "engine/executor/resident_layers.h"
#include "engine/layers/linear_attention_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentLinearAttention final : public ResidentMixer {
 public:
  explicit ResidentLinearAttention(const BasedLinearAttention& mixer)
      : core_(mixer.core()),
        dims_(core_.attention_dims()),
        kv_floats_(dims_.heads * dims_.head_dim * core_.feature_size),
        k_floats_(dims_.heads * core_.feature_size) {}

  absl::Status Load(ExecutorDevice& dev, int32_t slots) override {
    TWICE_ASSIGN_OR_RETURN(wq_, dev.UploadMatrix(core_.wq));
    TWICE_ASSIGN_OR_RETURN(wk_, dev.UploadMatrix(core_.wk));
    TWICE_ASSIGN_OR_RETURN(wv_, dev.UploadMatrix(core_.wv));
    TWICE_ASSIGN_OR_RETURN(wo_, dev.UploadMatrix(core_.wo));
    TWICE_ASSIGN_OR_RETURN(kv_, dev.Allocate(slots * kv_floats_));
    TWICE_ASSIGN_OR_RETURN(k_sum_, dev.Allocate(slots * k_floats_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    // q | k [H·F] | v | y [d]
    return rows * (2 * dims_.heads * dims_.feature_dim + 2 * dim());
  }
  int64_t weight_bytes() const override {
    return wq_->bytes() + wk_->bytes() + wv_->bytes() + wo_->bytes();
  }
  int64_t state_floats_per_slot() const override {
    return kv_floats_ + k_floats_;
  }

  absl::Status ZeroSlot(ExecutorDevice& dev, int32_t slot) override {
    TWICE_RETURN_IF_ERROR(dev.Zero(kv_of(slot)));
    return dev.Zero(k_sum_of(slot));
  }
  absl::Status CheckState(const LayerState& state,
                          int64_t /*tokens*/) const override {
    const auto* s = dynamic_cast<const LinearAttentionState*>(&state);
    if (s == nullptr || s->heads() != dims_.heads ||
        s->head_dim() != dims_.head_dim ||
        s->feature_size() != core_.feature_size) {
      return absl::FailedPreconditionError(
          "the layer state is not a matching linear_attention state");
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice& dev, const LayerState& state,
                      int32_t slot) override {
    const auto& s = static_cast<const LinearAttentionState&>(state);
    TWICE_RETURN_IF_ERROR(dev.CopyToDevice(s.kv(), kv_of(slot)));
    return dev.CopyToDevice(s.k_sum(), k_sum_of(slot));
  }
  absl::Status Download(ExecutorDevice& dev, int32_t slot, int64_t /*tokens*/,
                        LayerState& state) override {
    auto& s = static_cast<LinearAttentionState&>(state);
    TWICE_RETURN_IF_ERROR(dev.CopyToHost(kv_of(slot), s.kv()));
    return dev.CopyToHost(k_sum_of(slot), s.k_sum());
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       DeviceFloats h, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows;
    const int64_t qk = rows * dims_.heads * dims_.feature_dim;
    const DeviceFloats q = scratch.sub(0, qk);
    const DeviceFloats k = scratch.sub(qk, qk);
    const DeviceFloats v = scratch.sub(2 * qk, rows * dim());
    const DeviceFloats y = scratch.sub(2 * qk + v.size, rows * dim());
    TWICE_RETURN_IF_ERROR(dev.Linear(h, rows, *wq_, q));
    TWICE_RETURN_IF_ERROR(dev.Linear(h, rows, *wk_, k));
    TWICE_RETURN_IF_ERROR(dev.Linear(h, rows, *wv_, v));
    const float eps = core_.options.eps;
    if (pass.step != nullptr) {
      TWICE_RETURN_IF_ERROR(dev.LinearAttentionStepSlots(
          q, k, v, dims_, eps, kv_->floats(), k_sum_->floats(), *pass.step, y));
    } else {
      TWICE_RETURN_IF_ERROR(dev.LinearAttention(
          q, k, v, rows, dims_, eps, kv_of(pass.prefill_slot),
          k_sum_of(pass.prefill_slot), y));
    }
    return dev.Linear(y, rows, *wo_, x, LinearEpilogue{{}, true});
  }

 private:
  int64_t dim() const { return core_.options.dim; }
  DeviceFloats kv_of(int32_t slot) const {
    return kv_->floats().sub(slot * kv_floats_, kv_floats_);
  }
  DeviceFloats k_sum_of(int32_t slot) const {
    return k_sum_->floats().sub(slot * k_floats_, k_floats_);
  }

  const LinearAttentionCore& core_;
  const kernels::TaylorAttentionDims dims_;
  const int64_t kv_floats_;
  const int64_t k_floats_;
  std::unique_ptr<DeviceMatrix> wq_, wk_, wv_, wo_;
  std::unique_ptr<DeviceArray> kv_;     // [slots, H, hd, D]
  std::unique_ptr<DeviceArray> k_sum_;  // [slots, H, D]
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentLinearAttention(
    const BasedLinearAttention& m) {
  return std::make_unique<ResidentLinearAttention>(m);
}

}  // namespace twice::engine
