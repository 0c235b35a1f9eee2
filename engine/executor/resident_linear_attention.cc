// BasedLinearAttention on a device (based_linear_attention.h has the
// equations): q, k = h · Wq^T, h · Wk^T [rows, H·F], v = h · Wv^T; the
// Taylor feature map and the causal linear attention over the slot's
// S [H, hd, D] and z [H, D]; x += y · Wo^T. JRT-RNN's
// PrefixLinearAttention (prefix_linear_attention.h) is the same layer with
// an encoder: the first pass of a prefix read also projects its first E
// rows with Wk_enc, Wv_enc and sums them into the state before the causal
// scan; the pads' raw keys (decoder and encoder) are zero before the map.
#include <memory>

#include "engine/executor/resident_layers.h"
#include "engine/layers/linear_attention_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentLinearAttention final : public ResidentMixer {
 public:
  // wk_enc, wv_enc: the encoder's projections, or null (Based).
  ResidentLinearAttention(const LinearAttentionCore& core, const Tensor* wk_enc,
                          const Tensor* wv_enc)
      : core_(core),
        wk_enc_host_(wk_enc),
        wv_enc_host_(wv_enc),
        dims_(core_.attention_dims()),
        hf_(dims_.heads * dims_.feature_dim),
        kv_floats_(dims_.heads * dims_.head_dim * core_.feature_size),
        k_floats_(dims_.heads * core_.feature_size) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    TWICE_ASSIGN_OR_RETURN(wq_, dev.UploadMatrix(core_.wq));
    TWICE_ASSIGN_OR_RETURN(wk_, dev.UploadMatrix(core_.wk));
    TWICE_ASSIGN_OR_RETURN(wv_, dev.UploadMatrix(core_.wv));
    TWICE_ASSIGN_OR_RETURN(wo_, dev.UploadMatrix(core_.wo));
    if (wk_enc_host_ != nullptr) {
      TWICE_ASSIGN_OR_RETURN(wk_enc_, dev.UploadMatrix(*wk_enc_host_));
      TWICE_ASSIGN_OR_RETURN(wv_enc_, dev.UploadMatrix(*wv_enc_host_));
    }
    TWICE_ASSIGN_OR_RETURN(kv_, dev.Allocate(pools.slots * kv_floats_));
    TWICE_ASSIGN_OR_RETURN(k_sum_, dev.Allocate(pools.slots * k_floats_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    // q | k [H·F] | v | y [d], and with an encoder k_enc [H·F] | v_enc [d].
    const int64_t encoder = wk_enc_host_ != nullptr ? hf_ + dim() : 0;
    return rows * (2 * hf_ + 2 * dim() + encoder);
  }
  int64_t weight_bytes() const override {
    return wq_->bytes() + wk_->bytes() + wv_->bytes() + wo_->bytes() +
           (wk_enc_ != nullptr ? wk_enc_->bytes() + wv_enc_->bytes() : 0);
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
  absl::Status AddDownloads(int32_t slot, int64_t /*tokens*/, LayerState& state,
                            std::vector<HostCopy>& copies) override {
    auto& s = static_cast<LinearAttentionState&>(state);
    copies.push_back({kv_of(slot), s.kv()});
    copies.push_back({k_sum_of(slot), s.k_sum()});
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows;
    const DeviceFloats q = scratch.sub(0, rows * hf_);
    const DeviceFloats k = scratch.sub(q.size, rows * hf_);
    const DeviceFloats v = scratch.sub(2 * q.size, rows * dim());
    const DeviceFloats y = scratch.sub(2 * q.size + v.size, rows * dim());
    const LinearOutput qkv[] = {
        {wq_.get(), q, {}}, {wk_.get(), k, {}}, {wv_.get(), v, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, qkv));
    const float eps = core_.options.eps;
    if (pass.step != nullptr) {
      TWICE_RETURN_IF_ERROR(dev.LinearAttentionStepSlots(
          q, k, v, dims_, eps, kv_->floats(), k_sum_->floats(), *pass.step, y));
    } else if (pass.prefix != nullptr && wk_enc_ != nullptr) {
      for (const PrefillSegment& seg : pass.segments) {
        TWICE_RETURN_IF_ERROR(
            PrefixPassRows(dev, pass, seg, in, scratch, q, k, v, y));
      }
    } else {
      TWICE_RETURN_IF_ERROR(
          dev.LinearAttentionSegments(q, k, v, dims_, eps, kv_->floats(),
                                      k_sum_->floats(), *pass.segment_rows, y));
    }
    return dev.Linear(y, rows, *wo_, x, ResidualAdd());
  }

 private:
  // The first pass of a prefix read (one segment): its encoder's rows,
  // then its own.
  absl::Status PrefixPassRows(ExecutorDevice& dev, const ResidentPass& pass,
                              const PrefillSegment& seg, const LayerInput& in,
                              DeviceFloats scratch, DeviceFloats q,
                              DeviceFloats k, DeviceFloats v, DeviceFloats y) {
    const int64_t rows = pass.rows, n = seg.rows;
    const int64_t e = pass.prefix->encoder_tokens;
    const int64_t masked = pass.prefix->masked_tokens;
    if (pass.segments.size() != 1) {
      return absl::InvalidArgumentError(
          "a prefix read's pass holds its sequence alone");
    }
    if (!(0 <= masked && masked <= e && e <= n)) {
      return absl::InvalidArgumentError(
          "a prefix read's encoder must fit in its first pass");
    }
    const DeviceFloats seg_k = seg.Rows(k, hf_);
    const int64_t used = 2 * rows * hf_ + 2 * rows * dim();
    const DeviceFloats k_enc = scratch.sub(used, e * hf_);
    const DeviceFloats v_enc = scratch.sub(used + rows * hf_, e * dim());
    if (e > 0) {
      const DeviceFloats h_enc = in.h.sub(0, e * dim());
      const LinearOutput kv_enc[] = {{wk_enc_.get(), k_enc, {}},
                                     {wv_enc_.get(), v_enc, {}}};
      TWICE_RETURN_IF_ERROR(dev.Linears(h_enc, e, kv_enc));
      // The released mask: the pads' raw keys are zero; values stay.
      TWICE_RETURN_IF_ERROR(dev.Zero(seg_k.sub(0, masked * hf_)));
      TWICE_RETURN_IF_ERROR(dev.Zero(k_enc.sub(0, masked * hf_)));
    }
    return dev.LinearAttention(seg.Rows(q, hf_), seg_k, seg.Rows(v, dim()), n,
                               k_enc, v_enc, e, dims_, core_.options.eps,
                               kv_of(seg.slot), k_sum_of(seg.slot),
                               seg.Rows(y, dim()));
  }
  int64_t dim() const { return core_.options.dim; }
  DeviceFloats kv_of(int32_t slot) const {
    return kv_->floats().sub(slot * kv_floats_, kv_floats_);
  }
  DeviceFloats k_sum_of(int32_t slot) const {
    return k_sum_->floats().sub(slot * k_floats_, k_floats_);
  }

  const LinearAttentionCore& core_;
  const Tensor* const wk_enc_host_;
  const Tensor* const wv_enc_host_;
  const kernels::TaylorAttentionDims dims_;
  const int64_t hf_;  // H·F, the raw query / key width
  const int64_t kv_floats_;
  const int64_t k_floats_;
  std::unique_ptr<DeviceMatrix> wq_, wk_, wv_, wo_;
  std::unique_ptr<DeviceMatrix> wk_enc_, wv_enc_;  // null without an encoder
  std::unique_ptr<DeviceArray> kv_;                // [slots, H, hd, D]
  std::unique_ptr<DeviceArray> k_sum_;             // [slots, H, D]
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentLinearAttention(
    const BasedLinearAttention& m) {
  return std::make_unique<ResidentLinearAttention>(m.core(), nullptr, nullptr);
}

std::unique_ptr<ResidentMixer> NewResidentPrefixLinearAttention(
    const PrefixLinearAttention& m) {
  return std::make_unique<ResidentLinearAttention>(m.core(), &m.wk_enc(),
                                                   &m.wv_enc());
}

}  // namespace twice::engine
