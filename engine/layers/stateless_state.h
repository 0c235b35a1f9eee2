// StatelessState: the memory of a layer that keeps none (Nemotron-H's MLP
// layers). Every layer of a stack has a LayerState, so that layer l of the
// model is layer l of its states; this one holds nothing and serializes to
// no bytes (kind "stateless").
#ifndef TWICE_ENGINE_LAYERS_STATELESS_STATE_H_
#define TWICE_ENGINE_LAYERS_STATELESS_STATE_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class StatelessState final : public LayerState {
 public:
  static constexpr std::string_view kKind = "stateless";

  std::string_view kind() const override { return kKind; }
  int64_t ByteSize() const override { return 0; }
  std::unique_ptr<LayerState> Clone() const override {
    return std::make_unique<StatelessState>();
  }
  void Serialize(StateWriter& /*writer*/) const override {}
  [[nodiscard]] absl::Status Deserialize(StateReader& /*reader*/) override {
    return absl::OkStatus();
  }
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_STATELESS_STATE_H_
