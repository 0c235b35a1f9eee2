// PrefillRun: one prefill call's walk along a chain of segment states.
//
// Segment i of the call is named k_i = ChainKey(k_{i-1}, tokens of segment i),
// starting from the parent key (or the chain root). A segment whose key is
// already stored is skipped without loading anything; its tokens are kept
// as "pending" so that if a later segment needs the model state and the
// skipped state turns out to be missing or corrupt, the run recomputes it
// from the last state it holds. Not thread-safe: one call owns a run.
//
// Prefix modes (JRT-RNN): only the tokens read from an EMPTY state are
// prefix-encoded, so in a run from the chain root the first segment is the
// prefix and later segments continue causally; a run from a parent is causal
// throughout. The encoder covers exactly that first read, so the caller makes
// the first segment of a prefix chain at least the model's prefix_length
// tokens or all of them (PrefillService does); recomputing skipped segments
// from the root then yields the same encoder.
#ifndef TWICE_SERVICES_PREFILL_PREFILL_RUN_H_
#define TWICE_SERVICES_PREFILL_PREFILL_RUN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/models/model.h"
#include "services/common/state_cache.h"
#include "storage/state_store.h"

namespace twice::services {

struct PrefillRunOptions {
  std::string tenant;
  engine::PrefillMode mode = engine::PrefillMode::kCausal;
  // Start from this stored state; unset = the empty state at the chain root.
  std::optional<storage::StateKey> parent;
  // Loads the parent through this cache when set (not owned).
  StateCache* cache = nullptr;
};

struct SegmentResult {
  storage::StateKey key;
  bool reused = false;  // already stored; not recomputed
};

class PrefillRun {
 public:
  PrefillRun(const engine::Model& model, storage::StateStore& store,
             PrefillRunOptions options);

  // Reads one segment and stores the state after it (unless reused).
  [[nodiscard]] absl::StatusOr<SegmentResult> RunSegment(
      absl::Span<const int32_t> tokens);

  const storage::StateKey& current_key() const { return current_key_; }
  int64_t tokens_computed() const { return tokens_computed_; }
  int64_t states_recomputed() const { return states_recomputed_; }

 private:
  // Makes state_ hold the state at current_key_.
  [[nodiscard]] absl::Status Materialize();
  // The mode of a read into state_: the run's mode from an empty state, else
  // causal.
  engine::PrefillMode ReadMode() const;

  const engine::Model& model_;
  storage::StateStore& store_;
  PrefillRunOptions options_;
  bool start_is_root_;
  storage::StateKey start_key_;
  storage::StateKey current_key_;
  // The last state this run holds, at key state_key_, and the tokens read
  // since (segments skipped because they were stored).
  std::unique_ptr<engine::SequenceState> state_;
  storage::StateKey state_key_;
  // Whether state_ is the durable state stored at state_key_ (loaded from
  // or saved to the store): the next save then extends it, writing only
  // the blocks it lacks (SaveState's base).
  bool state_stored_ = false;
  std::vector<int32_t> pending_;
  int64_t tokens_computed_ = 0;
  int64_t states_recomputed_ = 0;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_PREFILL_PREFILL_RUN_H_
