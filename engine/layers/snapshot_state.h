// SnapshotState: a LayerState whose updates can be undone for less than a
// full copy. The growing states (full KV, RAT chunk-KV) only append rows
// and rewrite a small head, so a snapshot is that head plus the row count:
// O(1) or O(D) instead of the O(T) copy a Clone costs on every decode step.
// Models use it to keep "on error the state is unchanged" cheap.
#ifndef TWICE_ENGINE_LAYERS_SNAPSHOT_STATE_H_
#define TWICE_ENGINE_LAYERS_SNAPSHOT_STATE_H_

#include <memory>

namespace twice::engine {

class StateSnapshot {
 public:
  virtual ~StateSnapshot() = default;
};

class SnapshotState {
 public:
  virtual ~SnapshotState() = default;
  // What RestoreSnapshot needs to return this state to its current value.
  virtual std::unique_ptr<StateSnapshot> TakeSnapshot() const = 0;
  // Undoes every update since `snapshot`, which this state took.
  virtual void RestoreSnapshot(const StateSnapshot& snapshot) = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_SNAPSHOT_STATE_H_
