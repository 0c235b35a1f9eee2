#include "engine/executor/resident_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/models/state_checks.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

// A state's device copy: its slot in the executor. Holding the core keeps
// the executor (and the model its weights come from) alive.
class SlotResidency final : public StateResidency {
 public:
  SlotResidency(std::shared_ptr<ResidentMamba2Model::Core> core, SlotId slot)
      : core_(std::move(core)), slot_(slot) {}
  ~SlotResidency() override { (void)core_->executor->Release(slot_); }

  absl::Status CopyToHost(SequenceState& state) override {
    return core_->executor->SaveInto(slot_, state);
  }
  const ResidentMamba2Model::Core* core() const { return core_.get(); }
  SlotId slot() const { return slot_; }

 private:
  std::shared_ptr<ResidentMamba2Model::Core> core_;
  SlotId slot_;
};

}  // namespace

bool SupportsResidentExecutor(const Model& model) {
  return dynamic_cast<const Mamba2Model*>(&model) != nullptr;
}

bool IsResidentModel(const Model& model) {
  return dynamic_cast<const ResidentMamba2Model*>(&model) != nullptr;
}

absl::StatusOr<std::unique_ptr<ResidentMamba2Model>>
ResidentMamba2Model::Create(std::unique_ptr<Model> model,
                            std::unique_ptr<ExecutorDevice> device,
                            const Mamba2ExecutorOptions& options) {
  const auto* mamba2 = dynamic_cast<const Mamba2Model*>(model.get());
  if (mamba2 == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the resident executor runs Mamba-2 models; this model is \"",
        model == nullptr ? "none" : model->description().architecture, "\""));
  }
  auto core = std::make_shared<Core>();
  TWICE_ASSIGN_OR_RETURN(
      core->executor,
      Mamba2Executor::Create(*mamba2, std::move(device), options));
  core->model = std::move(model);
  return std::unique_ptr<ResidentMamba2Model>(
      new ResidentMamba2Model(std::move(core)));
}

absl::StatusOr<std::vector<SlotId>> ResidentMamba2Model::Bind(
    absl::Span<SequenceState* const> states) const {
  const std::string& fingerprint = description().fingerprint;
  for (SequenceState* state : states) {
    if (state->fingerprint() != fingerprint) {
      return absl::FailedPreconditionError(
          "the state belongs to another model");
    }
    if (state->damaged()) {
      return absl::FailedPreconditionError(
          "the state was damaged by a failed read; read the document again");
    }
  }
  std::vector<SlotId> slots;
  slots.reserve(states.size());
  for (SequenceState* state : states) {
    const auto* resident =
        dynamic_cast<const SlotResidency*>(state->residency());
    if (resident != nullptr && resident->core() == core_.get()) {
      slots.push_back(resident->slot());
      continue;
    }
    // Held elsewhere (another executor): its newest copy comes home first.
    TWICE_RETURN_IF_ERROR(state->SyncToHost());
    state->DetachResidency();
    TWICE_ASSIGN_OR_RETURN(SlotId slot, core_->executor->Resume(*state));
    state->AttachResidency(std::make_shared<SlotResidency>(core_, slot));
    slots.push_back(slot);
  }
  return slots;
}

absl::Status ResidentMamba2Model::Finish(
    absl::Status read, absl::Span<SequenceState* const> states,
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

absl::StatusOr<std::vector<float>> ResidentMamba2Model::Prefill(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (mode != PrefillMode::kCausal) {
    // Mamba-2 has no prefix encoder: the model's own answer.
    return core_->model->Prefill(tokens, state, mode);
  }
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description().vocab_size));
  SequenceState* const one[] = {&state};
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(one));
  absl::StatusOr<std::vector<float>> logits =
      core_->executor->Prefill(slots[0], tokens);
  TWICE_RETURN_IF_ERROR(Finish(logits.status(), one, slots));
  return logits;
}

absl::StatusOr<std::vector<float>> ResidentMamba2Model::Step(
    int32_t token, SequenceState& state) const {
  SequenceState* const one[] = {&state};
  return StepBatch(absl::MakeConstSpan(&token, 1), one);
}

absl::StatusOr<std::vector<float>> ResidentMamba2Model::StepBatch(
    absl::Span<const int32_t> tokens,
    absl::Span<SequenceState* const> states) const {
  TWICE_RETURN_IF_ERROR(CheckStepBatchShape(tokens, states));
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description().vocab_size));
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(states));
  absl::StatusOr<std::vector<float>> logits =
      core_->executor->StepLogits(tokens, slots);
  TWICE_RETURN_IF_ERROR(Finish(logits.status(), states, slots));
  return logits;
}

absl::StatusOr<std::vector<int32_t>> ResidentMamba2Model::StepBatchSampled(
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
  TWICE_ASSIGN_OR_RETURN(std::vector<SlotId> slots, Bind(states));
  absl::StatusOr<std::vector<int32_t>> ids =
      core_->executor->Step(tokens, slots, rules);
  TWICE_RETURN_IF_ERROR(Finish(ids.status(), states, slots));
  return ids;
}

}  // namespace twice::engine
