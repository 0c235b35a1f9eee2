// SequenceState: everything a model needs to continue a sequence — the model
// fingerprint it belongs to, the number of tokens read, and one LayerState
// per layer. Not thread-safe: one request owns a state at a time.
//
// Device residency: a resident executor (engine/executor/resident_model.h)
// keeps a sequence's layer states in a device slot between reads and
// attaches a StateResidency here. After a device read the device copy is
// the newest and the host layers are stale until SyncToHost copies it back;
// the codec, Clone and the store's save path call SyncToHost first, so the
// host layers are only materialised when something on the host reads them.
#ifndef TWICE_ENGINE_STATE_SEQUENCE_STATE_H_
#define TWICE_ENGINE_STATE_SEQUENCE_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class SequenceState;

// A device copy of one sequence's layer states. Destroying it frees the
// device slot.
class StateResidency {
 public:
  virtual ~StateResidency() = default;
  // Copies the device copy into `state`'s host layers.
  [[nodiscard]] virtual absl::Status CopyToHost(SequenceState& state) = 0;
};

class SequenceState {
 public:
  SequenceState(std::string fingerprint,
                std::vector<std::unique_ptr<LayerState>> layers)
      : fingerprint_(std::move(fingerprint)), layers_(std::move(layers)) {}

  const std::string& fingerprint() const { return fingerprint_; }
  int64_t token_count() const { return token_count_; }
  void set_token_count(int64_t n) { token_count_ = n; }

  int num_layers() const { return static_cast<int>(layers_.size()); }
  // The host copy: current unless host_stale() (then SyncToHost first).
  LayerState& layer(int i) { return *layers_[i]; }
  const LayerState& layer(int i) const { return *layers_[i]; }

  int64_t ByteSize() const;
  // Set by a model whose read failed after it had begun changing the
  // layers (a device fault: every input check runs before the first
  // change, engine/models/state_checks.h). A damaged state is refused by
  // every later read; recompute it from the document's tokens.
  bool damaged() const { return damaged_; }
  void MarkDamaged() { damaged_ = true; }
  // A host copy (SyncToHost first; a failed sync gives a damaged copy),
  // without the device residency.
  std::unique_ptr<SequenceState> Clone() const;

  // ---- device residency (see the top)
  StateResidency* residency() const { return residency_.get(); }
  void AttachResidency(std::shared_ptr<StateResidency> residency) {
    residency_ = std::move(residency);
    host_stale_ = false;
  }
  // Drops the device copy (frees its slot); call SyncToHost first to keep
  // what it holds.
  void DetachResidency() {
    residency_.reset();
    host_stale_ = false;
  }
  // A device read changed the device copy.
  void MarkHostStale() { host_stale_ = residency_ != nullptr; }
  bool host_stale() const { return host_stale_; }
  // Brings the host layers up to date with the device copy (no-op when
  // they are). The host layers are a cache of the device copy, so this is
  // const; a failure marks the state damaged. FAILED_PRECONDITION for a
  // damaged state, so the codec and the store's save path never write one.
  [[nodiscard]] absl::Status SyncToHost() const;

 private:
  std::string fingerprint_;
  int64_t token_count_ = 0;
  mutable bool damaged_ = false;
  std::vector<std::unique_ptr<LayerState>> layers_;
  std::shared_ptr<StateResidency> residency_;
  mutable bool host_stale_ = false;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_SEQUENCE_STATE_H_
