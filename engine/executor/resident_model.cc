#include "engine/executor/resident_model.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/executor/no_room.h"
#include "engine/models/state_checks.h"
#include "engine/state/state_io.h"
#include "kernels/status_macros.h"

namespace twice::engine {

// A state's device copy: its slot in the executor, or, once spilled to
// make room, a host copy until its next read. Holding the core keeps the
// executor (and the model its weights come from) alive. Every field is
// guarded by core->mu.
class ResidentModel::Residency final : public StateResidency {
 public:
  explicit Residency(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~Residency() override {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (listed_) core_->lru.erase(place_);
    if (slot_.has_value()) (void)core_->executor->Release(*slot_);
  }

  absl::Status CopyToHost(SequenceState& state) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (slot_.has_value()) return core_->executor->SaveInto(*slot_, state);
    return CopySpillTo(state);
  }

  // ---- under core->mu
  const Core* core() const { return core_.get(); }
  const std::optional<SlotId>& slot() const { return slot_; }
  void set_slot(SlotId slot) {
    slot_ = slot;
    spill_.reset();
  }
  int pins() const { return pins_; }
  void Pin() { ++pins_; }
  void Unpin() { --pins_; }
  // Most recently used: first in the core's list.
  void Touch() {
    if (listed_) core_->lru.erase(place_);
    core_->lru.push_front(this);
    place_ = core_->lru.begin();
    listed_ = true;
  }
  // The spilled host copy to upload again (null while resident).
  const SequenceState* spill() const { return spill_.get(); }
  // Saves the device copy into a host copy and frees the slot.
  absl::Status Spill() {
    std::unique_ptr<SequenceState> copy = core_->model->NewState();
    TWICE_RETURN_IF_ERROR(core_->executor->SaveInto(*slot_, *copy));
    TWICE_RETURN_IF_ERROR(core_->executor->Release(*slot_));
    spill_ = std::move(copy);
    slot_.reset();
    return absl::OkStatus();
  }

 private:
  // The spilled copy's layers into `state`'s (both of this model).
  absl::Status CopySpillTo(SequenceState& state) const {
    for (int l = 0; l < state.num_layers(); ++l) {
      std::string bytes;
      StateWriter writer(&bytes);
      spill_->layer(l).Serialize(writer);
      StateReader reader(bytes);
      TWICE_RETURN_IF_ERROR(state.layer(l).Deserialize(reader));
    }
    state.set_token_count(spill_->token_count());
    return absl::OkStatus();
  }

  std::shared_ptr<Core> core_;
  std::optional<SlotId> slot_;
  std::unique_ptr<SequenceState> spill_;
  int pins_ = 0;
  bool listed_ = false;
  std::list<Residency*>::iterator place_;
};

class ResidentModel::Pins {
 public:
  explicit Pins(Core& core) : core_(core) {}
  ~Pins() {
    std::lock_guard<std::mutex> lock(core_.mu);
    for (Residency* r : pinned_) r->Unpin();
  }
  // Under core.mu.
  void Add(Residency* r) {
    r->Pin();
    pinned_.push_back(r);
  }

 private:
  Core& core_;
  // The states of the call own these and outlive it.
  std::vector<Residency*> pinned_;
};

namespace {

// The least recently used state with a slot that no running call holds
// (core.mu held), or null. A damaged state is never spilled (there is
// nothing to save; its owner may still hold it, and it would otherwise
// stay the first choice and fail every eviction): its slot returns when
// the state goes.
ResidentModel::Residency* IdleResident(ResidentModel::Core& core) {
  for (auto it = core.lru.rbegin(); it != core.lru.rend(); ++it) {
    const std::optional<SlotId> slot = (*it)->slot();
    if ((*it)->pins() == 0 && slot.has_value() &&
        !core.executor->IsDamaged(*slot)) {
      return *it;
    }
  }
  return nullptr;
}

// `read` again after spilling an idle state, for as long as it answers
// for lack of room (no_room.h: a full KV cache; the executor changed no
// state) and an idle state is left; the call's own states are pinned.
// Other RESOURCE_EXHAUSTED answers (device memory) come back as they are.
template <typename T>
absl::StatusOr<T> ReadWithRoom(ResidentModel::Core& core,
                               const std::function<absl::StatusOr<T>()>& read) {
  while (true) {
    absl::StatusOr<T> result = read();
    if (!IsNoRoom(result.status())) return result;
    std::lock_guard<std::mutex> lock(core.mu);
    ResidentModel::Residency* idle = IdleResident(core);
    if (idle == nullptr) return result;
    TWICE_RETURN_IF_ERROR(idle->Spill());
  }
}

// A slot holding `source`, spilling the least recently used unpinned
// resident state while the pool is full (core.mu held).
absl::StatusOr<SlotId> AcquireSlot(
    ResidentModel::Core& core, const SequenceState& source,
    const std::function<ResidentModel::Residency*()>& victim) {
  while (true) {
    absl::StatusOr<SlotId> slot = core.executor->Resume(source);
    if (!IsNoRoom(slot.status())) return slot;
    ResidentModel::Residency* idle = victim();
    if (idle == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("all ", core.executor->capacity(),
                       " resident state slots are held by running reads; raise "
                       "--resident_slots or lower the decode batch"));
    }
    TWICE_RETURN_IF_ERROR(idle->Spill());
  }
}

}  // namespace

bool SupportsResidentExecutor(const Model& model) {
  const auto* stacked = dynamic_cast<const StackedModel*>(&model);
  return stacked != nullptr && SupportsResident(*stacked).ok();
}

bool IsResidentModel(const Model& model) {
  return dynamic_cast<const ResidentModel*>(&model) != nullptr;
}

absl::StatusOr<std::unique_ptr<ResidentModel>> ResidentModel::Create(
    std::unique_ptr<Model> model, std::unique_ptr<ExecutorDevice> device,
    const ResidentExecutorOptions& options, bool share_prefill_passes) {
  const auto* stacked = dynamic_cast<const StackedModel*>(model.get());
  if (stacked == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the resident executor runs Mamba-2, Based, JRT-RNN, Llama, "
        "Nemotron-H and RAT "
        "models; this "
        "model is "
        "\"",
        model == nullptr ? "none" : model->description().architecture, "\""));
  }
  if (absl::Status s = SupportsResident(*stacked); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("the \"", stacked->description().architecture,
                               "\" model cannot run resident: ", s.message()));
  }
  auto core = std::make_shared<Core>();
  TWICE_ASSIGN_OR_RETURN(
      core->executor,
      ResidentExecutor::Create(*stacked, std::move(device), options));
  core->stacked = stacked;
  core->model = std::move(model);
  return std::unique_ptr<ResidentModel>(
      new ResidentModel(std::move(core), share_prefill_passes));
}

absl::StatusOr<std::vector<SlotId>> ResidentModel::Bind(
    absl::Span<SequenceState* const> states, Pins& pins) const {
  const std::string& fingerprint = description().fingerprint;
  if (static_cast<int64_t>(states.size()) > core_->executor->capacity()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a read of ", states.size(),
                     " sequences needs more than "
                     "the ",
                     core_->executor->capacity(),
                     " resident state slots; raise --resident_slots"));
  }
  for (SequenceState* state : states) {
    if (state->fingerprint() != fingerprint) {
      return absl::FailedPreconditionError(
          "the state belongs to another model");
    }
    if (state->damaged()) {
      return absl::FailedPreconditionError(
          "the state was damaged by a failed read; read the document again");
    }
    // Held by another executor: its newest copy comes home first (outside
    // this core's lock, which that executor's sync does not take).
    const auto* r = dynamic_cast<const Residency*>(state->residency());
    if (state->residency() != nullptr &&
        (r == nullptr || r->core() != core_.get())) {
      TWICE_RETURN_IF_ERROR(state->SyncToHost());
      state->DetachResidency();
    }
  }
  std::lock_guard<std::mutex> lock(core_->mu);
  const auto victim = [this] { return IdleResident(*core_); };
  std::vector<SlotId> slots(states.size());
  std::vector<bool> bound(states.size(), false);
  // The call's states that hold a slot are pinned first, so that finding
  // slots for the others never spills one of them.
  for (size_t i = 0; i < states.size(); ++i) {
    auto* r = dynamic_cast<Residency*>(states[i]->residency());
    if (r == nullptr || !r->slot().has_value()) continue;
    r->Touch();
    pins.Add(r);
    slots[i] = *r->slot();
    bound[i] = true;
  }
  for (size_t i = 0; i < states.size(); ++i) {
    if (bound[i]) continue;
    SequenceState* state = states[i];
    auto* r = dynamic_cast<Residency*>(state->residency());
    if (r == nullptr) {
      TWICE_ASSIGN_OR_RETURN(SlotId slot, AcquireSlot(*core_, *state, victim));
      auto fresh = std::make_shared<Residency>(core_);
      r = fresh.get();
      r->set_slot(slot);
      state->AttachResidency(std::move(fresh));
    } else if (!r->slot().has_value()) {
      TWICE_ASSIGN_OR_RETURN(SlotId slot,
                             AcquireSlot(*core_, *r->spill(), victim));
      r->set_slot(slot);
    }
    r->Touch();
    pins.Add(r);
    slots[i] = *r->slot();
  }
  return slots;
}

absl::Status ResidentModel::Finish(absl::Status read,
                                   absl::Span<SequenceState* const> states,
                                   absl::Span<const SlotId> slots) const {
  for (size_t b = 0; b < states.size(); ++b) {
    if (!read.ok()) {
      // Refused calls change nothing; a device failure mid-read does.
      if (core_->executor->IsDamaged(slots[b])) states[b]->MarkDamaged();
      continue;
    }
    TWICE_ASSIGN_OR_RETURN(int64_t count,
                           core_->executor->TokenCount(slots[b]));
    states[b]->set_token_count(count);
    states[b]->MarkHostStale();
  }
  return read;
}

ResidentModel::ResidentModel(std::shared_ptr<Core> core,
                             bool share_prefill_passes)
    : core_(std::move(core)) {
  // A batch is at most one pass of rows: about the cost of its longest
  // read alone, plus one LM-head product per read. Half the slots leaves
  // the rest to the decode loop's states. Not sharing: batches of one, in
  // arrival order.
  batcher_ = std::make_unique<PrefillBatcher>(
      share_prefill_passes ? std::max(1, core_->executor->capacity() / 2) : 1,
      core_->executor->prefill_chunk(),
      [this](absl::Span<const PrefillRead> reads) {
        std::vector<absl::Span<const int32_t>> tokens;
        std::vector<SequenceState*> states;
        for (const PrefillRead& r : reads) {
          tokens.push_back(r.tokens);
          states.push_back(r.state);
        }
        return PrefillBatch(tokens, states);
      });
}

absl::StatusOr<std::vector<float>> ResidentModel::Prefill(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (!IsPrefixMode(mode)) {
    TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description().vocab_size));
    if (static_cast<int64_t>(tokens.size()) <=
        core_->executor->prefill_chunk()) {
      return batcher_->Read({tokens, &state});
    }
    return ReadAlone(tokens, state);
  }
  // The host model's checks and input (pads, Read-2x), read here.
  TWICE_ASSIGN_OR_RETURN(
      StackedModel::PrefixRead prefix,
      core_->stacked->MakePrefixRead(tokens, mode, state.token_count()));
  SequenceState* const one[] = {&state};
  Pins pins(*core_);
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(one, pins));
  absl::StatusOr<std::vector<float>> logits =
      ReadWithRoom<std::vector<float>>(*core_, [&] {
        return core_->executor->Prefill(slots[0], prefix.input,
                                        &prefix.encoding);
      });
  TWICE_RETURN_IF_ERROR(Finish(logits.status(), one, slots));
  return logits;
}

absl::StatusOr<std::vector<float>> ResidentModel::ReadAlone(
    absl::Span<const int32_t> tokens, SequenceState& state) const {
  SequenceState* const one[] = {&state};
  Pins pins(*core_);
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(one, pins));
  absl::StatusOr<std::vector<float>> logits = ReadWithRoom<std::vector<float>>(
      *core_, [&] { return core_->executor->Prefill(slots[0], tokens); });
  TWICE_RETURN_IF_ERROR(Finish(logits.status(), one, slots));
  return logits;
}

std::vector<absl::StatusOr<std::vector<float>>> ResidentModel::PrefillBatch(
    absl::Span<const absl::Span<const int32_t>> tokens,
    absl::Span<SequenceState* const> states) const {
  const size_t batch = states.size();
  std::vector<absl::StatusOr<std::vector<float>>> results;
  results.reserve(batch);
  auto one_by_one = [&] {
    results.clear();
    for (size_t b = 0; b < batch; ++b) {
      results.push_back(
          b < tokens.size() && states[b] != nullptr
              ? ReadAlone(tokens[b], *states[b])
              : absl::InvalidArgumentError("a read needs tokens and a state"));
    }
    return std::move(results);
  };
  if (batch <= 1 || tokens.size() != batch) return one_by_one();
  for (size_t b = 0; b < batch; ++b) {
    if (states[b] == nullptr ||
        !CheckTokenIds(tokens[b], description().vocab_size).ok()) {
      return one_by_one();
    }
  }
  std::vector<absl::StatusOr<std::vector<float>>> together;
  bool refused = false;  // as a whole, before anything was read
  {
    Pins pins(*core_);
    absl::StatusOr<std::vector<SlotId>> slots = Bind(states, pins);
    // Damage from before this call (refused by the executor's checks, not
    // made by this read).
    std::vector<bool> was_damaged(batch, false);
    for (size_t b = 0; slots.ok() && b < batch; ++b) {
      was_damaged[b] = core_->executor->IsDamaged((*slots)[b]);
    }
    absl::StatusOr<std::vector<float>> logits =
        slots.ok()
            ? ReadWithRoom<std::vector<float>>(
                  *core_,
                  [&] { return core_->executor->PrefillBatch(*slots, tokens); })
            : absl::StatusOr<std::vector<float>>(slots.status());
    bool damaged = false;
    for (size_t b = 0; slots.ok() && b < batch; ++b) {
      damaged = damaged ||
                (!was_damaged[b] && core_->executor->IsDamaged((*slots)[b]));
    }
    refused = !logits.ok() && !damaged;
    if (logits.ok()) {
      shared_prefills_.fetch_add(static_cast<int64_t>(batch),
                                 std::memory_order_relaxed);
    }
    if (!refused) {
      const absl::Status finished = Finish(logits.status(), states, *slots);
      const size_t row = finished.ok() ? logits->size() / batch : 0;
      for (size_t b = 0; b < batch; ++b) {
        if (finished.ok()) {
          together.emplace_back(std::vector<float>(
              logits->begin() + b * row, logits->begin() + (b + 1) * row));
        } else {
          together.emplace_back(finished);
        }
      }
    }
  }
  // Each on its own, with the batch's pins released.
  if (refused) return one_by_one();
  return together;
}

absl::StatusOr<std::vector<float>> ResidentModel::Step(
    int32_t token, SequenceState& state) const {
  SequenceState* const one[] = {&state};
  return StepBatch(absl::MakeConstSpan(&token, 1), one);
}

absl::StatusOr<std::vector<float>> ResidentModel::StepBatch(
    absl::Span<const int32_t> tokens,
    absl::Span<SequenceState* const> states) const {
  TWICE_RETURN_IF_ERROR(CheckStepBatchShape(tokens, states));
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description().vocab_size));
  Pins pins(*core_);
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(states, pins));
  absl::StatusOr<std::vector<float>> logits = ReadWithRoom<std::vector<float>>(
      *core_, [&] { return core_->executor->StepLogits(tokens, slots); });
  TWICE_RETURN_IF_ERROR(Finish(logits.status(), states, slots));
  return logits;
}

absl::StatusOr<std::vector<int32_t>> ResidentModel::StepBatchSampled(
    absl::Span<const int32_t> tokens, absl::Span<SequenceState* const> states,
    absl::Span<const kernels::SamplingRule> rules) const {
  TWICE_RETURN_IF_ERROR(CheckStepBatchShape(tokens, states));
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description().vocab_size));
  if (rules.size() != tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("StepBatchSampled: ", tokens.size(), " tokens and ",
                     rules.size(), " sampling rules"));
  }
  for (const kernels::SamplingRule& rule : rules) {
    TWICE_RETURN_IF_ERROR(kernels::ValidateSamplingRule(rule));
  }
  Pins pins(*core_);
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(states, pins));
  absl::StatusOr<std::vector<int32_t>> ids = ReadWithRoom<std::vector<int32_t>>(
      *core_, [&] { return core_->executor->Step(tokens, slots, rules); });
  TWICE_RETURN_IF_ERROR(Finish(ids.status(), states, slots));
  return ids;
}

}  // namespace twice::engine
