// ResidentModel: a model served by a resident executor
// (resident_executor.h: Mamba-2, Based, JRT-RNN, Llama, Nemotron-H and
// RAT) behind the
// ordinary Model interface, so the decode loop, the workflows and the store
// use it unchanged.
//
// A SequenceState read by this model gets a device slot (its residency,
// engine/state/sequence_state.h) on its first read: the host layers are
// uploaded once, every later read runs on the device, and the host layers
// are stale until something on the host needs them (the codec and the
// store's save path sync them back; Clone gives a host copy). Destroying
// the state frees its slot. A state that a model on the host (or another
// executor) read is uploaded again at its next read here.
//
// The slots are a cache: when a read needs a slot and none is free, or a
// full-attention model's KV cache has no blocks left for the read's
// tokens, the least recently used state that no running call holds is
// spilled (its device copy saved into a host copy kept by its residency,
// its slot and blocks freed) and comes back at its next read. Only a call
// that needs more slots or KV blocks than exist, or a pool whose every
// slot is held by running calls, fails (RESOURCE_EXHAUSTED, nothing
// changed).
//
// StepBatchSampled samples on the device, so a decode step brings back B
// ids. Concurrent causal Prefill calls of at most one prefill pass each
// (questions' prompts, short appends) are read together in shared passes
// when they arrive while the executor is busy (PrefillBatcher: no timer,
// nothing waits for company), each with the logits and state it would get
// alone; a bad read fails alone (PrefillBatch), but a device failure
// during a shared pass damages the states of every read in it. Prefix
// PrefillModes (JRT-RNN) read on the device too, with the wrapped model's
// checks and input. Errors: those of the wrapped model for bad input, with
// every state unchanged; a device failure marks the states of the call damaged.
// Thread-safe: reads are serialised on the executor's device; slots are handed
// out under the core's lock.
#ifndef TWICE_ENGINE_EXECUTOR_RESIDENT_MODEL_H_
#define TWICE_ENGINE_EXECUTOR_RESIDENT_MODEL_H_

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/prefill_batcher.h"
#include "engine/executor/resident_executor.h"
#include "engine/models/model.h"

namespace twice::engine {

class ResidentModel final : public Model {
 public:
  // `model` must be a StackedModel the executor can run (INVALID_ARGUMENT
  // or UNIMPLEMENTED otherwise; see SupportsResidentExecutor). Without
  // `share_prefill_passes`, concurrent reads run one after another.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ResidentModel>> Create(
      std::unique_ptr<Model> model, std::unique_ptr<ExecutorDevice> device,
      const ResidentExecutorOptions& options = {},
      bool share_prefill_passes = true);

  const ModelDescription& description() const override {
    return core_->model->description();
  }
  const Tokenizer& tokenizer() const override {
    return core_->model->tokenizer();
  }
  std::unique_ptr<SequenceState> NewState() const override {
    return core_->model->NewState();
  }

  [[nodiscard]] absl::StatusOr<std::vector<float>> Prefill(
      absl::Span<const int32_t> tokens, SequenceState& state,
      PrefillMode mode) const override;
  [[nodiscard]] absl::StatusOr<std::vector<float>> Step(
      int32_t token, SequenceState& state) const override;
  [[nodiscard]] absl::StatusOr<std::vector<float>> StepBatch(
      absl::Span<const int32_t> tokens,
      absl::Span<SequenceState* const> states) const override;
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> StepBatchSampled(
      absl::Span<const int32_t> tokens, absl::Span<SequenceState* const> states,
      absl::Span<const kernels::SamplingRule> rules) const override;

  // Reads tokens[b] into *states[b] (causal) for B sequences in shared
  // passes (ResidentExecutor::PrefillBatch) and returns each read's
  // result: the last position's logits, or the error that read alone
  // would get. A batch the executor refuses as a whole before reading
  // anything (a state of another model, one state twice, no room for all)
  // is read one sequence after another instead, so one bad read never
  // fails the others; a device failure damages every state of the batch.
  std::vector<absl::StatusOr<std::vector<float>>> PrefillBatch(
      absl::Span<const absl::Span<const int32_t>> tokens,
      absl::Span<SequenceState* const> states) const;

  ResidentExecutor& executor() const { return *core_->executor; }
  // Reads that shared prefill passes with others: those of PrefillBatch
  // calls the executor read as one batch (concurrent Prefill calls go
  // through prefill_batcher.h to PrefillBatch).
  int64_t batched_prefills() const {
    return shared_prefills_.load(std::memory_order_relaxed);
  }

  class Residency;
  // The model and its executor, shared with the states' residencies (which
  // may outlive this object); the executor is destroyed first. `mu` guards
  // every residency's slot, spill, pins and place in `lru` (most recently
  // used first); it is taken before the executor's own lock.
  struct Core {
    std::unique_ptr<Model> model;
    const StackedModel* stacked = nullptr;  // `model`, as the executor reads it
    std::unique_ptr<ResidentExecutor> executor;
    std::mutex mu;
    std::list<Residency*> lru;
  };

 private:
  ResidentModel(std::shared_ptr<Core> core, bool share_prefill_passes);
  // One causal read, as Prefill without the batcher.
  [[nodiscard]] absl::StatusOr<std::vector<float>> ReadAlone(
      absl::Span<const int32_t> tokens, SequenceState& state) const;

  // The residencies of one call, pinned (never spilled) until it ends.
  class Pins;
  // The states' slots, after checking every state (model, damage) and
  // uploading those without a slot of this executor (spilling idle states
  // when the pool is full). Nothing is read yet, so a failure leaves every
  // state as it was. `pins` holds the states' slots until the read ends.
  [[nodiscard]] absl::StatusOr<std::vector<SlotId>> Bind(
      absl::Span<SequenceState* const> states, Pins& pins) const;
  // After a device read of `states`: token counts from the executor, host
  // layers stale; on failure, the states are damaged.
  [[nodiscard]] absl::Status Finish(absl::Status read,
                                    absl::Span<SequenceState* const> states,
                                    absl::Span<const SlotId> slots) const;

  std::shared_ptr<Core> core_;
  // Concurrent causal reads of at most one prefill pass go through it, so
  // that those arriving while the executor is busy read together.
  std::unique_ptr<PrefillBatcher> batcher_;
  mutable std::atomic<int64_t> shared_prefills_{0};
};

// Whether `model` can run on a resident executor (resident_layers.h lists
// the layers it has forms of).
bool SupportsResidentExecutor(const Model& model);
// Whether `model` is one (LoadOptions::resident wrapped it).
bool IsResidentModel(const Model& model);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_RESIDENT_MODEL_H_
