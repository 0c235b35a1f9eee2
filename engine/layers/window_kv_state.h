// WindowKvState: the memory of a sliding-window attention layer — the
// post-rotary keys and the values of the last `capacity` tokens (W/2) in a
// ring, plus how many tokens the layer has read.
//
//   k, v [L, H, hd]   token at absolute position p lives in slot p mod L;
//                     slots of positions < count - L are stale
//   count             tokens read so far (the next token's position)
//
// Serialized (kind "sliding_window"): i64 count, then f32 tensors k and v.
#ifndef TWICE_ENGINE_LAYERS_WINDOW_KV_STATE_H_
#define TWICE_ENGINE_LAYERS_WINDOW_KV_STATE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class WindowKvState final : public LayerState {
 public:
  static constexpr std::string_view kKind = "sliding_window";

  WindowKvState(int64_t capacity, int64_t heads, int64_t head_dim);

  std::string_view kind() const override { return kKind; }
  int64_t ByteSize() const override;
  std::unique_ptr<LayerState> Clone() const override;
  void Serialize(StateWriter& writer) const override;
  [[nodiscard]] absl::Status Deserialize(StateReader& reader) override;

  int64_t capacity() const { return capacity_; }
  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t count() const { return count_; }
  void set_count(int64_t n) { count_ = n; }
  // Row of slot `slot` ([H · hd]).
  float* key(int64_t slot) { return keys_.data() + slot * heads_ * head_dim_; }
  float* value(int64_t slot) {
    return values_.data() + slot * heads_ * head_dim_;
  }
  // The whole rings, [L, H, hd] each.
  absl::Span<float> keys() { return absl::MakeSpan(keys_); }
  absl::Span<float> values() { return absl::MakeSpan(values_); }
  absl::Span<const float> keys() const { return keys_; }
  absl::Span<const float> values() const { return values_; }

 private:
  int64_t capacity_;
  int64_t heads_;
  int64_t head_dim_;
  int64_t count_ = 0;
  std::vector<float> keys_;    // [L, H, hd]
  std::vector<float> values_;  // [L, H, hd]
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_WINDOW_KV_STATE_H_
