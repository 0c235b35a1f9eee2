// LayerState: the recurrent memory of one layer. Each layer kind (linear
// attention KV + k-sum, conv tail, sliding-window ring, and later SSM,
// chunk-KV, full KV) is its own implementation; nothing outside the layer's
// own file looks inside it.
#ifndef TWICE_ENGINE_STATE_LAYER_STATE_H_
#define TWICE_ENGINE_STATE_LAYER_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace twice::engine {

class StateWriter;
class StateReader;

class LayerState {
 public:
  virtual ~LayerState() = default;
  // Stable name of the layout, written into the codec ("linear_attention").
  virtual std::string_view kind() const = 0;
  // Bytes of payload this state occupies.
  virtual int64_t ByteSize() const = 0;
  virtual std::unique_ptr<LayerState> Clone() const = 0;
  // Writes shapes and payload. Size and bytes come from the same code path.
  virtual void Serialize(StateWriter& writer) const = 0;
  // Reads into a state of the same kind created by the model; validates
  // every shape against this state's own before reading.
  [[nodiscard]] virtual absl::Status Deserialize(StateReader& reader) = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_LAYER_STATE_H_
