// LinearAttentionState: the memory of a Based linear-attention layer.
//
//   kv [H, hd, D]  kv[h][e][m] = sum_t phi(k_t)[m] · v_t[e]
//   k  [H, D]      k[h][m]     = sum_t phi(k_t)[m]
// with D = 1 + F + F^2. Its size does not depend on the sequence length.
//
// Serialized (kind "linear_attention"): f32 tensors kv, then k.
#ifndef TWICE_ENGINE_LAYERS_LINEAR_ATTENTION_STATE_H_
#define TWICE_ENGINE_LAYERS_LINEAR_ATTENTION_STATE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class LinearAttentionState final : public LayerState {
 public:
  static constexpr std::string_view kKind = "linear_attention";

  LinearAttentionState(int64_t heads, int64_t head_dim, int64_t feature_size);

  std::string_view kind() const override { return kKind; }
  int64_t ByteSize() const override;
  std::unique_ptr<LayerState> Clone() const override;
  void Serialize(StateWriter& writer) const override;
  [[nodiscard]] absl::Status Deserialize(StateReader& reader) override;

  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t feature_size() const { return feature_size_; }
  absl::Span<float> kv() { return absl::MakeSpan(kv_); }
  absl::Span<float> k_sum() { return absl::MakeSpan(k_sum_); }
  absl::Span<const float> kv() const { return kv_; }
  absl::Span<const float> k_sum() const { return k_sum_; }

 private:
  int64_t heads_;
  int64_t head_dim_;
  int64_t feature_size_;
  std::vector<float> kv_;     // [H, hd, D]
  std::vector<float> k_sum_;  // [H, D]
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_LINEAR_ATTENTION_STATE_H_
