#include "services/prefill/prefill_run.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/state/state_blocks.h"
#include "services/common/state_io.h"

namespace twice::services {

PrefillRun::PrefillRun(const engine::Model& model, storage::StateStore& store,
                       PrefillRunOptions options)
    : model_(model), store_(store), options_(std::move(options)) {
  start_is_root_ = !options_.parent.has_value();
  start_key_ =
      start_is_root_
          ? storage::RootKey(model_.description().fingerprint,
                             PrefillModeName(options_.mode), options_.tenant)
          : *options_.parent;
  current_key_ = start_key_;
  state_key_ = start_key_;
}

engine::PrefillMode PrefillRun::ReadMode() const {
  return state_->token_count() == 0 ? options_.mode
                                    : engine::PrefillMode::kCausal;
}

absl::Status PrefillRun::Materialize() {
  if (state_ != nullptr && pending_.empty()) return absl::OkStatus();
  if (!pending_.empty()) {
    // Prefer the stored state at the end of the skipped segments.
    absl::StatusOr<std::unique_ptr<engine::SequenceState>> loaded =
        LoadState(store_, model_, current_key_);
    if (loaded.ok()) {
      state_ = *std::move(loaded);
      state_key_ = current_key_;
      state_stored_ = true;
      pending_.clear();
      return absl::OkStatus();
    }
    if (loaded.status().code() != absl::StatusCode::kNotFound) {
      return loaded.status();
    }
    ++states_recomputed_;
    store_.RecordRecompute();
  }
  if (state_ == nullptr) {
    if (start_is_root_) {
      state_ = model_.NewState();
      state_stored_ = false;
    } else {
      absl::StatusOr<std::unique_ptr<engine::SequenceState>> parent =
          options_.cache != nullptr
              ? options_.cache->Load(store_, model_, start_key_)
              : LoadState(store_, model_, start_key_);
      if (!parent.ok()) {
        return absl::Status(
            parent.status().code(),
            absl::StrCat("parent state: ", parent.status().message()));
      }
      state_ = *std::move(parent);
      state_stored_ = true;
    }
  }
  if (!pending_.empty()) {
    absl::StatusOr<std::vector<float>> logits =
        model_.Prefill(pending_, *state_, ReadMode());
    if (!logits.ok()) return logits.status();
    tokens_computed_ += static_cast<int64_t>(pending_.size());
    pending_.clear();
    state_stored_ = false;
  }
  state_key_ = current_key_;
  return absl::OkStatus();
}

absl::StatusOr<SegmentResult> PrefillRun::RunSegment(
    absl::Span<const int32_t> tokens) {
  if (tokens.empty()) {
    return absl::InvalidArgumentError("a prefill segment needs tokens");
  }
  const storage::StateKey next = storage::ChainKey(current_key_, tokens);
  absl::StatusOr<bool> stored = store_.HasState(next);
  if (!stored.ok()) return stored.status();
  if (*stored) {
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
    current_key_ = next;
    return SegmentResult{next, /*reused=*/true};
  }
  absl::Status ready = Materialize();
  if (!ready.ok()) return ready;
  std::optional<StateBase> base;
  if (state_stored_) {
    base = StateBase{state_key_, engine::StateRowCounts(*state_)};
  }
  absl::StatusOr<std::vector<float>> logits =
      model_.Prefill(tokens, *state_, ReadMode());
  if (!logits.ok()) return logits.status();
  tokens_computed_ += static_cast<int64_t>(tokens.size());
  // The state has advanced: whatever happens next, it is no longer the
  // stored state at state_key_.
  state_stored_ = false;
  absl::Status saved = SaveState(store_, next, *state_, options_.tenant, base);
  if (!saved.ok()) return saved;
  current_key_ = next;
  state_key_ = next;
  state_stored_ = true;
  return SegmentResult{next, /*reused=*/false};
}

}  // namespace twice::services
