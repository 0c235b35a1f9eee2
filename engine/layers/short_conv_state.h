// ShortConvState: the memory of a BaseConv layer — the last K-1 rows of the
// conv branch input u1 (time-ordered, zeros before the first token).
//
// Serialized (kind "short_conv"): one f32 tensor tail [K-1, C].
#ifndef TWICE_ENGINE_LAYERS_SHORT_CONV_STATE_H_
#define TWICE_ENGINE_LAYERS_SHORT_CONV_STATE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class ShortConvState final : public LayerState {
 public:
  static constexpr std::string_view kKind = "short_conv";

  ShortConvState(int64_t kernel_size, int64_t channels);

  std::string_view kind() const override { return kKind; }
  int64_t ByteSize() const override;
  std::unique_ptr<LayerState> Clone() const override;
  void Serialize(StateWriter& writer) const override;
  [[nodiscard]] absl::Status Deserialize(StateReader& reader) override;

  int64_t kernel_size() const { return kernel_size_; }
  int64_t channels() const { return channels_; }
  // [K-1, C].
  absl::Span<float> tail() { return absl::MakeSpan(tail_); }
  absl::Span<const float> tail() const { return tail_; }

 private:
  int64_t kernel_size_;
  int64_t channels_;
  std::vector<float> tail_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_SHORT_CONV_STATE_H_
