// Sliding-window attention on a device, Based's (sliding_window_attention.h)
// and RAT-SWA's (rat_swa_attention.h), which differ only in the order of
// their fused projection's outputs: qkv = h · Wqkv^T [rows, 3d] (RAT-SWA's
// v | q | k reordered to q | k | v by two row copies); rotary q and k at
// the token positions; softmax attention over the window; x += y · Wo^T.
// Per slot a ring of the last L post-rotary keys and values
// (WindowKvState's layout: position p in ring row p mod L); the position of
// a sequence is its token count.
//
// A prefill pass runs every sequence's rows in one call
// (ExecutorDevice::WindowAttentionSegments: by default each ring's live
// rows and the new keys gathered into a context [P + T, d] for the window
// kernel, then the last min(T, L) new keys and values written into the
// ring); a step does all of it per row in one slot-indexed call.
#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/executor/resident_layers.h"
#include "engine/layers/window_kv_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// What the two layers share: shapes, and their weights on the host.
struct WindowLayer {
  int64_t dim = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t window = 0;
  float rope_base = 10000.0f;
  const Tensor* wqkv = nullptr;  // [3d, d]
  const Tensor* wo = nullptr;    // [d, d]
  bool value_first = false;      // wqkv's rows are v | q | k
};

class ResidentWindowAttention final : public ResidentMixer {
 public:
  explicit ResidentWindowAttention(const WindowLayer& layer)
      : layer_(layer),
        d_(layer.dim),
        window_(layer.window),
        ring_floats_(window_ * d_) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    TWICE_ASSIGN_OR_RETURN(wqkv_, dev.UploadMatrix(*layer_.wqkv));
    TWICE_ASSIGN_OR_RETURN(wo_, dev.UploadMatrix(*layer_.wo));
    TWICE_ASSIGN_OR_RETURN(ring_k_, dev.Allocate(pools.slots * ring_floats_));
    TWICE_ASSIGN_OR_RETURN(ring_v_, dev.Allocate(pools.slots * ring_floats_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    // qkv [3d] | y [d] per row, and the context keys and values
    // [L + rows, d] each (v | q | k first, when reordered, in their place).
    return rows * 4 * d_ + std::max(2 * (window_ + rows), 3 * rows) * d_;
  }
  int64_t weight_bytes() const override {
    return wqkv_->bytes() + wo_->bytes();
  }
  int64_t state_floats_per_slot() const override { return 2 * ring_floats_; }

  absl::Status ZeroSlot(ExecutorDevice& dev, int32_t slot) override {
    TWICE_RETURN_IF_ERROR(dev.Zero(ring_of(*ring_k_, slot)));
    return dev.Zero(ring_of(*ring_v_, slot));
  }
  absl::Status CheckState(const LayerState& state,
                          int64_t tokens) const override {
    const auto* s = dynamic_cast<const WindowKvState*>(&state);
    if (s == nullptr || s->capacity() != window_ ||
        s->heads() != layer_.heads || s->head_dim() != layer_.head_dim) {
      return absl::FailedPreconditionError(
          "the layer state is not a matching sliding_window state");
    }
    if (tokens >= 0 && s->count() != tokens) {
      return absl::FailedPreconditionError(
          absl::StrCat("the window state has read ", s->count(),
                       " tokens but the sequence ", tokens));
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice& dev, const LayerState& state,
                      int32_t slot) override {
    const auto& s = static_cast<const WindowKvState&>(state);
    TWICE_RETURN_IF_ERROR(dev.CopyToDevice(s.keys(), ring_of(*ring_k_, slot)));
    return dev.CopyToDevice(s.values(), ring_of(*ring_v_, slot));
  }
  absl::Status AddDownloads(int32_t slot, int64_t tokens, LayerState& state,
                            std::vector<HostCopy>& copies) override {
    auto& s = static_cast<WindowKvState&>(state);
    copies.push_back({ring_of(*ring_k_, slot), s.keys()});
    copies.push_back({ring_of(*ring_v_, slot), s.values()});
    s.set_count(tokens);
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows;
    const DeviceFloats qkv = scratch.sub(0, rows * 3 * d_);
    const DeviceFloats y = scratch.sub(qkv.size, rows * d_);
    const float scale = 1.0f / std::sqrt(static_cast<float>(layer_.head_dim));
    if (layer_.value_first) {
      // v | q | k into the context area (free until the window op), then
      // q | k and v into qkv.
      const DeviceFloats vqk = scratch.sub(qkv.size + y.size, rows * 3 * d_);
      const LinearOutput wqkv[] = {{wqkv_.get(), vqk, {}}};
      TWICE_RETURN_IF_ERROR(in.Project(dev, wqkv));
      TWICE_RETURN_IF_ERROR(dev.CopyRows(vqk.sub(d_, vqk.size - d_), 3 * d_,
                                         qkv, 3 * d_, rows, 2 * d_));
      TWICE_RETURN_IF_ERROR(dev.CopyRows(
          vqk, 3 * d_, qkv.sub(2 * d_, qkv.size - 2 * d_), 3 * d_, rows, d_));
    } else {
      const LinearOutput wqkv[] = {{wqkv_.get(), qkv, {}}};
      TWICE_RETURN_IF_ERROR(in.Project(dev, wqkv));
    }
    const kernels::WindowStepDims dims{layer_.heads, layer_.head_dim, window_};
    if (pass.step != nullptr) {
      TWICE_RETURN_IF_ERROR(dev.WindowAttentionStepSlots(
          qkv, 3 * d_, dims, layer_.rope_base, scale, ring_k_->floats(),
          ring_v_->floats(), *pass.step, y));
    } else {
      TWICE_RETURN_IF_ERROR(dev.WindowAttentionSegments(
          qkv, 3 * d_, dims, layer_.rope_base, scale, ring_k_->floats(),
          ring_v_->floats(), *pass.segment_rows,
          scratch.sub(qkv.size + y.size, 2 * (window_ + rows) * d_), y));
    }
    return dev.Linear(y, rows, *wo_, x, ResidualAdd());
  }

 private:
  DeviceFloats ring_of(const DeviceArray& ring, int32_t slot) const {
    return ring.floats().sub(slot * ring_floats_, ring_floats_);
  }
  const WindowLayer layer_;
  const int64_t d_;
  const int64_t window_;  // L, ring rows
  const int64_t ring_floats_;
  std::unique_ptr<DeviceMatrix> wqkv_, wo_;
  std::unique_ptr<DeviceArray> ring_k_, ring_v_;  // [slots, L, d] each
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentWindowAttention(
    const SlidingWindowAttention& m) {
  const SlidingWindowOptions& o = m.options();
  return std::make_unique<ResidentWindowAttention>(
      WindowLayer{o.dim, o.heads, m.head_dim(), o.window, o.rotary_base,
                  &m.wqkv(), &m.wo(), /*value_first=*/false});
}

std::unique_ptr<ResidentMixer> NewResidentRatSwaAttention(
    const RatSwaAttention& m) {
  const RatSwaOptions& o = m.options();
  return std::make_unique<ResidentWindowAttention>(
      WindowLayer{o.dim, o.heads, m.head_dim(), o.window, o.rope_base,
                  &m.in_proj(), &m.out_proj(), /*value_first=*/true});
}

}  // namespace twice::engine
