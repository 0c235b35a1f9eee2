// SequenceState: everything a model needs to continue a sequence — the model
// fingerprint it belongs to, the number of tokens read, and one LayerState
// per layer. Not thread-safe: one request owns a state at a time.
#ifndef TWICE_ENGINE_STATE_SEQUENCE_STATE_H_
#define TWICE_ENGINE_STATE_SEQUENCE_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/state/layer_state.h"

namespace twice::engine {

class SequenceState {
 public:
  SequenceState(std::string fingerprint,
                std::vector<std::unique_ptr<LayerState>> layers)
      : fingerprint_(std::move(fingerprint)), layers_(std::move(layers)) {}

  const std::string& fingerprint() const { return fingerprint_; }
  int64_t token_count() const { return token_count_; }
  void set_token_count(int64_t n) { token_count_ = n; }

  int num_layers() const { return static_cast<int>(layers_.size()); }
  LayerState& layer(int i) { return *layers_[i]; }
  const LayerState& layer(int i) const { return *layers_[i]; }

  int64_t ByteSize() const;
  // Set by a model whose read failed after it had begun changing the
  // layers (a device fault: every input check runs before the first
  // change, engine/models/state_checks.h). A damaged state is refused by
  // every later read; recompute it from the document's tokens.
  bool damaged() const { return damaged_; }
  void MarkDamaged() { damaged_ = true; }
  std::unique_ptr<SequenceState> Clone() const;

 private:
  std::string fingerprint_;
  int64_t token_count_ = 0;
  bool damaged_ = false;
  std::vector<std::unique_ptr<LayerState>> layers_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_SEQUENCE_STATE_H_
