// SlidingWindowAttention on a device (sliding_window_attention.h has the
// equations): qkv = h · Wqkv^T [rows, 3d]; rotary q and k; softmax
// attention over the window; x += y · Wo^T. Per slot a ring of the last L
// post-rotary keys and values (WindowKvState's layout: position p in ring
// row p mod L); the position of a sequence is its token count.
//
// A prefill pass gathers the ring's live rows (at most two contiguous runs)
// and the new keys into a context [P + T, d] for the window kernel, then
// writes the last min(T, L) new keys and values into the ring; a step does
// all of it per row in one slot-indexed call.
#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/executor/resident_layers.h"
#include "engine/layers/window_kv_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentWindowAttention final : public ResidentMixer {
 public:
  explicit ResidentWindowAttention(const SlidingWindowAttention& mixer)
      : mixer_(mixer),
        d_(mixer.options().dim),
        window_(mixer.options().window),
        ring_floats_(window_ * d_) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    TWICE_ASSIGN_OR_RETURN(wqkv_, dev.UploadMatrix(mixer_.wqkv()));
    TWICE_ASSIGN_OR_RETURN(wo_, dev.UploadMatrix(mixer_.wo()));
    TWICE_ASSIGN_OR_RETURN(ring_k_, dev.Allocate(pools.slots * ring_floats_));
    TWICE_ASSIGN_OR_RETURN(ring_v_, dev.Allocate(pools.slots * ring_floats_));
    return absl::OkStatus();
  }
  int64_t ScratchFloats(int64_t rows) const override {
    // qkv [3d] | y [d] per row, and the context keys and values
    // [L + rows, d] each.
    return rows * 4 * d_ + 2 * (window_ + rows) * d_;
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
        s->heads() != mixer_.options().heads ||
        s->head_dim() != mixer_.head_dim()) {
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
  absl::Status Download(ExecutorDevice& dev, int32_t slot, int64_t tokens,
                        LayerState& state) override {
    auto& s = static_cast<WindowKvState&>(state);
    TWICE_RETURN_IF_ERROR(dev.CopyToHost(ring_of(*ring_k_, slot), s.keys()));
    TWICE_RETURN_IF_ERROR(dev.CopyToHost(ring_of(*ring_v_, slot), s.values()));
    s.set_count(tokens);
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       DeviceFloats h, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows;
    const DeviceFloats qkv = scratch.sub(0, rows * 3 * d_);
    const DeviceFloats y = scratch.sub(qkv.size, rows * d_);
    const float scale = 1.0f / std::sqrt(static_cast<float>(mixer_.head_dim()));
    TWICE_RETURN_IF_ERROR(dev.Linear(h, rows, *wqkv_, qkv));
    if (pass.step != nullptr) {
      const kernels::WindowStepDims dims{mixer_.options().heads,
                                         mixer_.head_dim(), window_};
      TWICE_RETURN_IF_ERROR(dev.WindowAttentionStepSlots(
          qkv, 3 * d_, dims, mixer_.options().rotary_base, scale,
          ring_k_->floats(), ring_v_->floats(), *pass.step, y));
    } else {
      TWICE_RETURN_IF_ERROR(Prefill(
          dev, pass, qkv,
          scratch.sub(qkv.size + y.size, 2 * (window_ + rows) * d_), y, scale));
    }
    return dev.Linear(y, rows, *wo_, x, LinearEpilogue{{}, true});
  }

 private:
  DeviceFloats ring_of(const DeviceArray& ring, int32_t slot) const {
    return ring.floats().sub(slot * ring_floats_, ring_floats_);
  }
  // Ring rows [first, first + count) (mod L) of `slot` <-> `count`
  // consecutive rows of `other` (row stride `stride`): at most two runs.
  absl::Status CopyRing(ExecutorDevice& dev, const DeviceArray& ring,
                        int32_t slot, int64_t first, int64_t count,
                        DeviceFloats other, int64_t stride, bool to_ring) {
    const DeviceFloats r = ring_of(ring, slot);
    int64_t done = 0;
    while (done < count) {
      const int64_t row = (first + done) % window_;
      const int64_t run = std::min(count - done, window_ - row);
      const DeviceFloats ring_rows = r.sub(row * d_, run * d_);
      const DeviceFloats other_rows =
          other.sub(done * stride, (run - 1) * stride + d_);
      TWICE_RETURN_IF_ERROR(
          to_ring ? dev.CopyRows(other_rows, stride, ring_rows, d_, run, d_)
                  : dev.CopyRows(ring_rows, d_, other_rows, stride, run, d_));
      done += run;
    }
    return absl::OkStatus();
  }

  absl::Status Prefill(ExecutorDevice& dev, const ResidentPass& pass,
                       DeviceFloats qkv, DeviceFloats context, DeviceFloats y,
                       float scale) {
    const int64_t rows = pass.rows;
    const int64_t start = pass.prefill_start;
    const int32_t slot = pass.prefill_slot;
    const SlidingWindowOptions& o = mixer_.options();
    const int64_t hd = mixer_.head_dim();
    TWICE_RETURN_IF_ERROR(dev.RopeRotateHalf(qkv, rows, 3 * d_, o.heads, hd,
                                             start, o.rotary_base));
    TWICE_RETURN_IF_ERROR(dev.RopeRotateHalf(qkv.sub(d_, qkv.size - d_), rows,
                                             3 * d_, o.heads, hd, start,
                                             o.rotary_base));
    // Context: the ring's live rows, oldest first, then the new keys.
    const int64_t past = std::min(start, window_);
    const DeviceFloats ctx_k = context.sub(0, (past + rows) * d_);
    const DeviceFloats ctx_v = context.sub(ctx_k.size, (past + rows) * d_);
    const DeviceFloats new_k = qkv.sub(d_, (rows - 1) * 3 * d_ + d_);
    const DeviceFloats new_v = qkv.sub(2 * d_, (rows - 1) * 3 * d_ + d_);
    TWICE_RETURN_IF_ERROR(
        CopyRing(dev, *ring_k_, slot, start - past, past, ctx_k, d_, false));
    TWICE_RETURN_IF_ERROR(
        CopyRing(dev, *ring_v_, slot, start - past, past, ctx_v, d_, false));
    TWICE_RETURN_IF_ERROR(dev.CopyRows(
        new_k, 3 * d_, ctx_k.sub(past * d_, rows * d_), d_, rows, d_));
    TWICE_RETURN_IF_ERROR(dev.CopyRows(
        new_v, 3 * d_, ctx_v.sub(past * d_, rows * d_), d_, rows, d_));
    const kernels::WindowAttentionDims dims{rows, past, o.heads, hd, window_};
    TWICE_RETURN_IF_ERROR(
        dev.WindowAttention(qkv, 3 * d_, ctx_k, ctx_v, dims, scale, y));
    // Only the last L new tokens stay visible to later queries.
    const int64_t keep = std::min(rows, window_);
    const int64_t first = rows - keep;
    TWICE_RETURN_IF_ERROR(CopyRing(
        dev, *ring_k_, slot, start + first, keep,
        new_k.sub(first * 3 * d_, (keep - 1) * 3 * d_ + d_), 3 * d_, true));
    return CopyRing(dev, *ring_v_, slot, start + first, keep,
                    new_v.sub(first * 3 * d_, (keep - 1) * 3 * d_ + d_), 3 * d_,
                    true);
  }

  const SlidingWindowAttention& mixer_;
  const int64_t d_;
  const int64_t window_;  // L, ring rows
  const int64_t ring_floats_;
  std::unique_ptr<DeviceMatrix> wqkv_, wo_;
  std::unique_ptr<DeviceArray> ring_k_, ring_v_;  // [slots, L, d] each
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentWindowAttention(
    const SlidingWindowAttention& m) {
  return std::make_unique<ResidentWindowAttention>(m);
}

}  // namespace twice::engine
