// Mamba2State: the memory of one Mamba-2 mixer layer — the conv window and
// the SSM state. Its size does not depend on the number of tokens read.
//
//   conv_tail [K-1, conv_dim]  the last K-1 raw (pre-conv, pre-SiLU) xBC rows,
//                              time-ordered, zeros before the first token
//                              (upstream keeps K columns; the oldest is
//                              shifted out before it is read, so K-1 suffice)
//   ssm       [H, P, N]        S of the recurrence (kernels/ssd_chunk_scan.h)
// conv_dim = E + 2·G·N. Payload: ((K-1)·conv_dim + H·P·N) f32 values.
//
// Serialized (kind "mamba2"): f32 tensor conv_tail [K-1, conv_dim], then
// f32 tensor ssm [H, P, N].
#ifndef TWICE_ENGINE_LAYERS_MAMBA2_STATE_H_
#define TWICE_ENGINE_LAYERS_MAMBA2_STATE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

struct Mamba2StateShape {
  int64_t conv_kernel = 0;  // K
  int64_t conv_dim = 0;     // E + 2·G·N
  int64_t heads = 0;        // H
  int64_t head_dim = 0;     // P
  int64_t state_dim = 0;    // N

  bool operator==(const Mamba2StateShape&) const = default;
  // f32 values of payload: (K-1)·conv_dim + H·P·N.
  int64_t payload_floats() const {
    return (conv_kernel - 1) * conv_dim + heads * head_dim * state_dim;
  }
};

class Mamba2State final : public LayerState {
 public:
  static constexpr std::string_view kKind = "mamba2";

  explicit Mamba2State(const Mamba2StateShape& shape);

  std::string_view kind() const override { return kKind; }
  // Serialized bytes: the payload plus two tensor headers.
  int64_t ByteSize() const override;
  std::unique_ptr<LayerState> Clone() const override;
  void Serialize(StateWriter& writer) const override;
  [[nodiscard]] absl::Status Deserialize(StateReader& reader) override;

  const Mamba2StateShape& shape() const { return shape_; }
  // [K-1, conv_dim].
  absl::Span<float> conv_tail() { return absl::MakeSpan(conv_tail_); }
  absl::Span<const float> conv_tail() const { return conv_tail_; }
  // [H, P, N].
  absl::Span<float> ssm() { return absl::MakeSpan(ssm_); }
  absl::Span<const float> ssm() const { return ssm_; }

 private:
  Mamba2StateShape shape_;
  std::vector<float> conv_tail_;
  std::vector<float> ssm_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_MAMBA2_STATE_H_
