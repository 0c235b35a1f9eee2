// Mamba2Mixer on a device (mamba2_mixer.h has the equations): per slot a
// conv tail [(K-1)·(E + 2GN)] and an SSM state [H·P·N]. A prefill pass
// runs the chunked SSD scan on its one slot; a step runs the slot-indexed
// conv and SSD steps for every row in one call each.
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/executor/resident_layers.h"
#include "engine/layers/mamba2_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentMamba2Mixer final : public ResidentMixer {
 public:
  explicit ResidentMamba2Mixer(const Mamba2Mixer& mixer)
      : m_(mixer.parameters()),
        in_dim_(m_.in_proj.dim(0)),
        tail_floats_((m_.shape.conv_kernel - 1) * m_.shape.conv_dim),
        ssm_floats_(m_.shape.heads * m_.shape.head_dim * m_.shape.state_dim) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    TWICE_ASSIGN_OR_RETURN(conv_w_, UploadVector(dev, m_.conv_w.span()));
    TWICE_ASSIGN_OR_RETURN(conv_b_, UploadVector(dev, m_.conv_b.span()));
    TWICE_ASSIGN_OR_RETURN(dt_bias_, UploadVector(dev, m_.dt_bias.span()));
    TWICE_ASSIGN_OR_RETURN(a_, UploadVector(dev, m_.a));
    TWICE_ASSIGN_OR_RETURN(d_, UploadVector(dev, m_.d.span()));
    TWICE_ASSIGN_OR_RETURN(gate_w_, UploadVector(dev, m_.norm_w.span()));
    TWICE_ASSIGN_OR_RETURN(in_proj_, dev.UploadMatrix(m_.in_proj));
    TWICE_ASSIGN_OR_RETURN(out_proj_, dev.UploadMatrix(m_.out_proj));
    TWICE_ASSIGN_OR_RETURN(tails_, dev.Allocate(pools.slots * tail_floats_));
    TWICE_ASSIGN_OR_RETURN(ssm_, dev.Allocate(pools.slots * ssm_floats_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    // zxbcdt | conv | delta | y
    return rows * (in_dim_ + m_.shape.conv_dim + m_.shape.heads + m_.inner);
  }
  int64_t weight_bytes() const override {
    int64_t bytes = in_proj_->bytes() + out_proj_->bytes();
    for (const auto* v : {&conv_w_, &conv_b_, &dt_bias_, &a_, &d_, &gate_w_}) {
      bytes += ArrayBytes(**v);
    }
    return bytes;
  }
  int64_t state_floats_per_slot() const override {
    return tail_floats_ + ssm_floats_;
  }

  absl::Status ZeroSlot(ExecutorDevice& dev, int32_t slot) override {
    TWICE_RETURN_IF_ERROR(dev.Zero(tail_of(slot)));
    return dev.Zero(ssm_of(slot));
  }
  absl::Status CheckState(const LayerState& state,
                          int64_t /*tokens*/) const override {
    const auto* s = dynamic_cast<const Mamba2State*>(&state);
    if (s == nullptr || !(s->shape() == m_.shape)) {
      return absl::FailedPreconditionError(
          "the layer state is not a matching mamba2 state");
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice& dev, const LayerState& state,
                      int32_t slot) override {
    const auto& s = static_cast<const Mamba2State&>(state);
    TWICE_RETURN_IF_ERROR(dev.CopyToDevice(s.conv_tail(), tail_of(slot)));
    return dev.CopyToDevice(s.ssm(), ssm_of(slot));
  }
  absl::Status AddDownloads(int32_t slot, int64_t /*tokens*/, LayerState& state,
                            std::vector<HostCopy>& copies) override {
    auto& s = static_cast<Mamba2State&>(state);
    copies.push_back({tail_of(slot), s.conv_tail()});
    copies.push_back({ssm_of(slot), s.ssm()});
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const Mamba2StateShape& shape = m_.shape;
    const int64_t rows = pass.rows;
    const int64_t in_dim = in_dim_;
    const int64_t c = shape.conv_dim;
    const int64_t e = m_.inner;
    const int64_t heads = shape.heads;
    const int64_t gn = m_.groups * shape.state_dim;
    const DeviceFloats zx = scratch.sub(0, rows * in_dim);
    const DeviceFloats conv = scratch.sub(zx.size, rows * c);
    const DeviceFloats delta = scratch.sub(zx.size + conv.size, rows * heads);
    const DeviceFloats y =
        scratch.sub(zx.size + conv.size + delta.size, rows * e);
    // Column blocks of in_proj's output (z | xBC | dt) and of the conv
    // output (x | B | C), as strided views of rows.
    const DeviceFloats xbc_in = zx.sub(e, (rows - 1) * in_dim + c);
    const DeviceFloats dt_in = zx.sub(e + c, (rows - 1) * in_dim + heads);
    const DeviceFloats conv_x = conv.sub(0, (rows - 1) * c + e);
    const DeviceFloats conv_b = conv.sub(e, (rows - 1) * c + gn);
    const DeviceFloats conv_c = conv.sub(e + gn, (rows - 1) * c + gn);
    const kernels::SsdShape ssd{heads, shape.head_dim, m_.groups,
                                shape.state_dim};

    const LinearOutput in_proj[] = {{in_proj_.get(), zx, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, in_proj));
    if (pass.step != nullptr) {
      TWICE_RETURN_IF_ERROR(dev.CausalConv1dStepSlots(
          xbc_in, c, in_dim, conv_w_->floats(), shape.conv_kernel,
          tails_->floats(), *pass.step, conv));
    } else {
      TWICE_RETURN_IF_ERROR(dev.CausalConv1dSegments(
          xbc_in, c, in_dim, conv_w_->floats(), shape.conv_kernel,
          tails_->floats(), *pass.segment_rows, conv));
    }
    TWICE_RETURN_IF_ERROR(dev.BiasSiluRows(conv, rows, conv_b_->floats()));
    TWICE_RETURN_IF_ERROR(
        dev.SoftplusBiasRows(dt_in, rows, in_dim, dt_bias_->floats(), delta));
    if (pass.step != nullptr) {
      TWICE_RETURN_IF_ERROR(dev.SsdStepSlots(ssd, conv_x, c, conv_b, conv_c, c,
                                             delta, a_->floats(), d_->floats(),
                                             ssm_->floats(), *pass.step, y));
    } else {
      TWICE_RETURN_IF_ERROR(dev.SsdChunkScanSegments(
          ssd, m_.chunk, conv_x, c, conv_b, conv_c, c, delta, a_->floats(),
          d_->floats(), ssm_->floats(), *pass.segment_rows, y));
    }
    TWICE_RETURN_IF_ERROR(dev.GatedGroupRmsNorm(zx, in_dim, y, rows, e,
                                                m_.groups, gate_w_->floats(),
                                                m_.gated_norm_eps, y));
    return dev.Linear(y, rows, *out_proj_, x, ResidualAdd());
  }

 private:
  DeviceFloats tail_of(int32_t slot) const {
    return tails_->floats().sub(slot * tail_floats_, tail_floats_);
  }
  DeviceFloats ssm_of(int32_t slot) const {
    return ssm_->floats().sub(slot * ssm_floats_, ssm_floats_);
  }

  const Mamba2Mixer::Parameters m_;
  const int64_t in_dim_;
  const int64_t tail_floats_;
  const int64_t ssm_floats_;
  std::unique_ptr<DeviceArray> conv_w_, conv_b_, dt_bias_, a_, d_, gate_w_;
  std::unique_ptr<DeviceMatrix> in_proj_, out_proj_;
  std::unique_ptr<DeviceArray> tails_;  // [slots, (K-1)·conv_dim]
  std::unique_ptr<DeviceArray> ssm_;    // [slots, H·P·N]
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentMamba2Mixer(const Mamba2Mixer& m) {
  return std::make_unique<ResidentMamba2Mixer>(m);
}

}  // namespace twice::engine
