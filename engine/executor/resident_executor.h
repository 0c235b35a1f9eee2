// ResidentExecutor: a loaded model resident on one ExecutorDevice.
//
// At creation the weights go to the device once (matrices in the form the
// device's Linear reads; a tied head shares the embedding's copy), with one
// activation workspace and `slots` state slots: each block's mixer keeps a
// pool [slots, ...] of its state (resident_layer.h). A sequence lives in a
// slot (SlotPool) from NewSequence / Resume until Release; between calls
// its states never leave the device.
//
//   Prefill(slot, tokens)        reads tokens into the slot, in passes of
//                                `prefill_chunk` tokens (chunk-parallel
//                                forms), and returns the last position's
//                                logits; PrefillBatch reads several
//                                sequences, packed into shared passes;
//   Step(tokens, slots, rules)   one decode step for B sequences at once:
//                                embedding, every block (one GEMM per
//                                projection for the B rows; the state
//                                updates slot-indexed, one call each),
//                                head and sampling on the device; only the
//                                B ids come back. Its inputs go up in one
//                                copy into buffers kept per batch size (a
//                                paged model's block tables refilled in
//                                place), and the step itself is recorded
//                                once as a device graph and replayed where
//                                the device records graphs (step_graphs.h),
//                                padded to a few batch-size buckets;
//   Save(slot) / Resume(state)   the only times a state crosses to the
//                                host: for the store's codec, and back. A
//                                saved state is the engine's SequenceState
//                                of the same model, so a state read on one
//                                device continues on the other.
//
// Models: Mamba-2, Based (BaseConv, linear attention, sliding window,
// SwiGLU), JRT-RNN (prefix reads included), Llama, Nemotron-H, RAT (with
// its window layers) and Granite-4.0-H (dense or with experts, routed on
// the device in steps; its embedding, residual and logit multipliers ride
// on the embedding and the GEMM epilogues); resident_layers.h lists the
// layers. Growing
// states (full attention's KV caches, RAT's closed chunks) keep their rows
// in blocks of per-layer pools (PagedKvTables): a read first reserves the
// blocks its tokens need for every slot of the call, so a full pool
// answers RESOURCE_EXHAUSTED before anything runs, and Release returns a
// slot's blocks. The equations are the host model's, computed by the same
// kernels on the CPU device. Checks run before anything changes (ids in
// [0, vocab), slots live and distinct, rules valid: INVALID_ARGUMENT /
// FAILED_PRECONDITION with every slot unchanged); a device failure before
// the call's work touched a state (uploading its block tables or inputs)
// changes nothing either, and one after that marks the slots of the call
// damaged, and they are refused until released (its error is then
// INTERNAL, naming the device's: RESOURCE_EXHAUSTED promises that nothing
// changed, INVALID_ARGUMENT would blame the request). Thread-safe: calls are
// serialised (one device stream); the model must outlive the executor.
#ifndef TWICE_ENGINE_EXECUTOR_RESIDENT_EXECUTOR_H_
#define TWICE_ENGINE_EXECUTOR_RESIDENT_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/paged_kv_tables.h"
#include "engine/executor/resident_layer.h"
#include "engine/executor/slot_pool.h"
#include "engine/executor/step_graphs.h"
#include "engine/models/stacked_model.h"
#include "engine/state/sequence_state.h"
#include "kernels/sampling.h"

namespace twice::engine {

inline constexpr int64_t kCpuPrefillChunk = 512;
inline constexpr int64_t kCudaPrefillChunk = 4096;

struct ResidentExecutorOptions {
  int32_t slots = 64;  // sequences resident at once, >= 1
  // Tokens per layer-by-layer prefill pass: the workspace holds that many
  // rows. A GPU wants larger passes than the CPU (fewer launches, GEMMs
  // that fill the device); the loader picks by device (kCpuPrefillChunk,
  // kCudaPrefillChunk) unless told.
  int64_t prefill_chunk = kCpuPrefillChunk;
  // Paged states (full attention's KV cache, RAT's closed chunks): tokens
  // each table holds for all slots together (rounded up to whole blocks),
  // and rows per block.
  int64_t kv_cache_tokens = 65536;
  int64_t kv_block_size = 16;
  // Record each batch size's decode step as a device graph and replay it
  // (step_graphs.h). Where the device has no graphs (the CPU), steps run
  // as they are.
  bool step_graphs = true;
  // Pad a step of B sequences to StepBucketRows(B, slots) rows, each extra
  // row reading token 0 at position 0 into a slot of its own (the states
  // of a step's rows must be distinct: up to 7 more slots of state for 64
  // slots, 15 for 256, never handed out), so that a few recorded graphs
  // serve every batch size: while steps are recorded (a device that
  // records graphs, with step_graphs on; the default), always (tests of
  // the padding on the CPU), or never.
  enum class StepPadding { kWhileRecording, kAlways, kNever };
  StepPadding step_padding = StepPadding::kWhileRecording;
  // A prefill pass of short reads goes as rows (ResidentPass::row_map)
  // within two bounds; past either it goes by segments (short reads
  // resuming long documents), and 0 makes every pass go by segments.
  // The work it adds: each row walks its sequence's positions [0, p]
  // itself, where a tiled prefill shares them across a segment's rows;
  // at most this many (row, position) pairs in a pass.
  int64_t row_form_max_attended_positions = int64_t{1} << 16;
  // Its block tables repeat a sequence's block list for each of its rows:
  // at most this many entries, rows x the longest list (4 MiB).
  int64_t row_form_max_table_entries = int64_t{1} << 20;
};

// Whether every layer of `model` has a resident form (resident_layers.h):
// OK, or UNIMPLEMENTED naming the layer that has none.
[[nodiscard]] absl::Status SupportsResident(const StackedModel& model);

class ResidentExecutor {
 public:
  // INVALID_ARGUMENT for options out of range; UNIMPLEMENTED for a model
  // with a layer the executor has no form of (SupportsResident); the
  // device's errors (RESOURCE_EXHAUSTED without room for weights,
  // workspace and slots).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ResidentExecutor>> Create(
      const StackedModel& model, std::unique_ptr<ExecutorDevice> device,
      const ResidentExecutorOptions& options = {});
  ~ResidentExecutor();

  // A slot holding an empty sequence (zero tokens read).
  [[nodiscard]] absl::StatusOr<SlotId> NewSequence();
  // A slot holding `state` (a state of this model: FAILED_PRECONDITION for
  // another model's, a damaged one, one of another shape or a window that
  // has not read the state's tokens).
  [[nodiscard]] absl::StatusOr<SlotId> Resume(const SequenceState& state);
  // The slot's sequence as a host SequenceState of the model (for the
  // store's codec); the slot keeps it.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<SequenceState>> Save(
      SlotId slot);
  // The same into an existing state of the model (its host layers and
  // token count), e.g. the SequenceState the slot belongs to.
  [[nodiscard]] absl::Status SaveInto(SlotId slot, SequenceState& state);
  [[nodiscard]] absl::Status Release(SlotId slot);
  [[nodiscard]] absl::StatusOr<int64_t> TokenCount(SlotId slot) const;
  // Whether a failed device call left the slot's state damaged.
  bool IsDamaged(SlotId slot) const;

  // Reads `tokens` (>= 1) into the slot; the logits of the last position
  // (padded_vocab_size floats). With `prefix` (StackedModel::MakePrefixRead)
  // the read is a JRT-RNN prefix read of an empty sequence: its first pass
  // holds the whole encoder.
  [[nodiscard]] absl::StatusOr<std::vector<float>> Prefill(
      SlotId slot, absl::Span<const int32_t> tokens,
      const PrefixEncoding* prefix = nullptr);
  // Reads tokens[b] (>= 1 each) into slots[b] (distinct) and returns the
  // last position's logits of each, [B, padded_vocab_size]: the same
  // numbers as B Prefill calls (up to the order of sums), in fewer passes.
  // A pass of prefill_chunk rows holds the sequences in order, a sequence
  // that does not fit continuing in the next: its row-wise work (norms,
  // products, MLPs) runs once for all its rows, convolutions and Mamba-2
  // scans in one call over its segments (ExecutorDevice's *Segments
  // operations), attention per sequence (PrefillSegment).
  // Every check, and the upload of the sequences' block tables, runs
  // before anything changes; a failure once the first pass began damages
  // every slot of the call.
  [[nodiscard]] absl::StatusOr<std::vector<float>> PrefillBatch(
      absl::Span<const SlotId> slots,
      absl::Span<const absl::Span<const int32_t>> tokens);
  // Reads tokens[b] into slots[b] (distinct, B <= slots) and returns the id
  // rules[b] picks from each row's logits.
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> Step(
      absl::Span<const int32_t> tokens, absl::Span<const SlotId> slots,
      absl::Span<const kernels::SamplingRule> rules);
  // The same step, returning the logits [B, padded_vocab_size] instead of
  // sampling (tests, and callers that post-process logits on the host).
  [[nodiscard]] absl::StatusOr<std::vector<float>> StepLogits(
      absl::Span<const int32_t> tokens, absl::Span<const SlotId> slots);

  ExecutorDevice& device() { return *device_; }
  // Rows per prefill pass (ResidentExecutorOptions::prefill_chunk).
  int64_t prefill_chunk() const { return options_.prefill_chunk; }
  // The device's traffic, read under the executor's lock (for metrics
  // threads).
  DeviceTraffic traffic() const;
  int32_t capacity() const { return pool_.capacity(); }
  int32_t sequences() const { return pool_.in_use(); }
  // Device bytes of one slot's fixed-size states, of one token in the
  // paged KV caches (0 without full attention), and of the weights.
  int64_t state_bytes_per_slot() const;
  int64_t kv_bytes_per_token() const;
  // Whether some layer keeps a paged state (a KV cache, RAT's chunks);
  // the free blocks of all its tables, and the tokens the scarcest table
  // still has room for (0 without paged layers).
  bool has_paged_kv() const { return !kv_tables_.empty(); }
  int64_t free_kv_blocks() const;
  int64_t free_kv_tokens() const;
  int64_t weight_bytes() const { return weight_bytes_; }
  // OK while decode steps are recorded as graphs; else why not. And the
  // graphs kept (under the executor's lock).
  absl::Status step_graphs_status() const;
  int step_graphs() const;

 private:
  struct Block;
  struct SlotInfo {
    int64_t tokens = 0;
    bool damaged = false;
  };

  ResidentExecutor(const StackedModel& model,
                   std::unique_ptr<ExecutorDevice> device,
                   const ResidentExecutorOptions& options);
  [[nodiscard]] absl::Status Load();
  // Live, not damaged, distinct (callers hold mu_).
  [[nodiscard]] absl::Status CheckSlots(absl::Span<const SlotId> slots) const;
  [[nodiscard]] absl::Status ZeroSlot(int32_t slot);
  // Every block in place on x (its pass.rows rows embedded before); the
  // states of the pass's slots advance.
  [[nodiscard]] absl::Status RunBlocks(const ResidentPass& pass);
  // logits rows [first_logits_row, + rows) = head(final_norm(x)), x
  // [rows, dim] (rows of the residual stream).
  [[nodiscard]] absl::Status Head(DeviceFloats x, int64_t rows,
                                  int64_t first_logits_row);
  // Prefill and PrefillBatch after their checks (callers hold mu_): the
  // passes, the first of at most first_pass_rows rows (a prefix read's
  // encoder), the logits of each sequence's last position.
  [[nodiscard]] absl::StatusOr<std::vector<float>> ReadSequences(
      absl::Span<const SlotId> slots,
      absl::Span<const absl::Span<const int32_t>> tokens,
      const PrefixEncoding* prefix, int64_t first_pass_rows);
  // The step's logits into `logits` (checks done by the caller); the
  // slots damaged when it fails after their states began to change.
  [[nodiscard]] absl::Status StepToLogits(absl::Span<const int32_t> tokens,
                                          absl::Span<const SlotId> slots,
                                          absl::Span<float> logits);
  // The work of a sampled step on its filled buffers, all queued on the
  // device (what a step graph records): embedding, blocks, head, sampling.
  [[nodiscard]] absl::Status StepWork(
      DeviceStep& step, absl::Span<const DeviceBlockTable* const> kv_tables);
  // Marks `slots` damaged by the failure `cause` and returns it as
  // INTERNAL (see the class comment).
  [[nodiscard]] absl::Status Damaged(absl::Span<const SlotId> slots,
                                     const absl::Status& cause);
  // The rows a step of `batch` sequences runs as (step_padding).
  int64_t PaddedStepRows(int64_t batch) const;
  // Blocks for `extra` more tokens in each slot (nothing to do without
  // paged layers); RESOURCE_EXHAUSTED, nothing taken, when the pool is
  // short. Then the slots' block tables on the device for the pass (null
  // without paged layers).
  [[nodiscard]] absl::Status ReserveKv(absl::Span<const SlotId> slots,
                                       int64_t extra);
  // The same, extra[b] more tokens in slots[b].
  [[nodiscard]] absl::Status ReserveKv(absl::Span<const SlotId> slots,
                                       absl::Span<const int64_t> extra);
  // Gives back the blocks the slots hold past their tokens: what a failed
  // call reserved for tokens it never read.
  void ReturnUnreadKv(absl::Span<const SlotId> slots);
  // The pass's tables, owned and as the pass's pointers.
  struct PassTables {
    std::vector<std::unique_ptr<DeviceBlockTable>> owned;
    std::vector<const DeviceBlockTable*> views;
  };
  [[nodiscard]] absl::StatusOr<PassTables> PassKvTables(
      absl::Span<const SlotId> slots);
  // A prefill pass as rows (ResidentPass::row_map): the map of each row's
  // slot and position and the tables with a row per pass row.
  struct PassRowForm {
    std::unique_ptr<DeviceSlotMap> map;
    PassTables tables;
  };
  // Whether a pass of these segments (`rows` in all) goes as rows: a layer
  // reads it so, it holds at least two segments, all shorter than
  // kRowFormMaxSegmentRows, and it keeps within the options' row_form
  // bounds.
  bool UsesRowForm(absl::Span<const PrefillSegment> segments,
                   int64_t rows) const;
  [[nodiscard]] absl::StatusOr<PassRowForm> UploadRowForm(
      absl::Span<const PrefillSegment> segments, int64_t rows);

  const StackedModel& model_;
  std::unique_ptr<ExecutorDevice> device_;
  const ResidentExecutorOptions options_;
  const int64_t dim_;
  const int64_t vocab_rows_;
  // Workspace rows: max(prefill_chunk, slots, the prefix encoder's length).
  const int64_t rows_;
  // Padding rows' slots: slots, slots + 1, ... (as many as the most any
  // bucket pads; 0 without padding); the layers' pools hold state_slots_ =
  // slots + pad_slots_ slots.
  const int32_t pad_slots_;
  const int32_t state_slots_;

  mutable std::mutex mu_;
  SlotPool pool_;
  std::vector<SlotInfo> slot_info_;
  PagedKvTables kv_tables_;
  bool reads_pass_rows_ = false;  // some mixer reads_pass_rows()
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<DeviceMatrix> embedding_;
  std::unique_ptr<DeviceMatrix> lm_head_;  // null when tied to embedding_
  std::unique_ptr<DeviceArray> final_norm_;
  // Workspace: the residual stream, the normalised rows, the layers'
  // shared scratch, the logits.
  std::unique_ptr<DeviceArray> x_, h_, scratch_, logits_;
  int64_t weight_bytes_ = 0;
  StepGraphs step_graphs_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_RESIDENT_EXECUTOR_H_
