// ResidentMixer, ResidentFeedForward: one block's sequence mixer and MLP
// kept on an ExecutorDevice by a resident executor (resident_executor.h).
//
// Each is built from a loaded host layer (resident_layers.h picks the kind)
// and computes that layer's equations with the device's operations, so the
// CPU device gives the host model's results. A block runs
//
//   h = RMSNorm1(x);  x += Mixer(h)       Forward(pass, in, scratch, x)
//   h = RMSNorm2(x);  x += FFN(h)         Forward(in, scratch, x)
//
// where `in` (LayerInput) is x with the norm: the layer applies it itself,
// with its first products of h when it starts with some (Project), so a
// device that converts a GEMM's input does so in the norm's pass.
// with the residual add in the last projection's epilogue (ResidualAdd():
// LinearEpilogue::accumulate, scaled by the model's residual multiplier,
// 1 except in Granite-4.0-H). `scratch` is a shared activation workspace of
// at least ScratchFloats(pass rows) floats that the layer may overwrite.
//
// A mixer owns its state pool: per slot the same numbers as its host
// LayerState (Upload / Download convert between the two, so a state read on
// one device continues on the other). Checks of a host state (kind, shape)
// run before anything changes.
#ifndef TWICE_ENGINE_EXECUTOR_RESIDENT_LAYER_H_
#define TWICE_ENGINE_EXECUTOR_RESIDENT_LAYER_H_

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/kv_block_table.h"
#include "engine/layers/mixer.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

// A paged layer's block table `index` of `tables` (a pass's or a
// segment's: one per row granularity); FAILED_PRECONDITION when there is
// none (a paged layer run without its executor's tables).
inline absl::StatusOr<const DeviceBlockTable*> KvTableAt(
    absl::Span<const DeviceBlockTable* const> tables, int index) {
  if (index < 0 || index >= static_cast<int>(tables.size())) {
    return absl::FailedPreconditionError(
        "a paged layer's pass came without its block tables");
  }
  return tables[index];
}

// One sequence's rows in a prefill pass: pass rows [first_row, first_row +
// rows) are tokens [start, start + rows) of the sequence in slot `slot`.
// Paged states read that slot's block tables (kv_tables, on the device).
// A pass may hold pieces of several sequences (ResidentExecutor::
// PrefillBatch): row-wise work (norms, products, MLPs) runs over all the
// pass's rows at once; convolutions and Mamba-2's scan take all segments
// in one call (ExecutorDevice's *Segments operations: on CUDA one launch
// per kernel for passes of several segments, the scan when every segment
// is shorter than its chunked form's minimum), linear and window attention
// take them in one call too (ExecutorDevice::LinearAttentionSegments,
// WindowAttentionSegments), and full and RAT attention read a pass of
// short segments as rows (ResidentPass::row_map; RAT's chunk scan then
// takes every segment in one call, ExecutorDevice::RatChunkScanSegments),
// else segment by segment.
struct PrefillSegment {
  int32_t slot = -1;
  int64_t start = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  absl::Span<const DeviceBlockTable* const> kv_tables = {};

  DevicePassRows pass_rows() const { return {rows, start, nullptr}; }
  absl::StatusOr<const DeviceBlockTable*> kv_table(int index) const {
    return KvTableAt(kv_tables, index);
  }
  // The segment's rows of `a`, an array of the pass's rows of `width`
  // floats each.
  DeviceFloats Rows(DeviceFloats a, int64_t width) const {
    return a.sub(first_row * width, rows * width);
  }
};

// The rows one forward pass runs: a prefill pass (its `segments`, in row
// order, cover rows [0, rows)) or a decode step (row r is one token of the
// sequence in slot step->slots()[r], at position step->positions()[r]).
// The first pass of a prefix read (JRT-RNN) is one segment and carries its
// encoding: rows [0, encoder) also form the non-causal encoder, rows [0,
// masked) are left padding; mixers without an encoder read them as
// ordinary tokens.
// A step's paged states (full attention's KV cache, RAT's closed chunks)
// read the step's block tables (PagedKvTables::Upload of the step's
// slots, one per row granularity, on the device; empty when the model has
// none).
//
// A prefill pass of at least two segments, each shorter than
// kRowFormMaxSegmentRows, may also come as rows (row_map set): row r is a
// token of the sequence in slot row_map->slots()[r] at position
// row_map->positions()[r], and row_kv_tables hold one table row per pass
// row (its sequence's blocks), so a paged layer that reads_pass_rows()
// writes and attends the whole pass in one call of a step's form. Every
// row's key and value are written before any row attends, and each row
// attends its own sequence up to its position, so this is the causal read
// of each segment. Its rows re-read their sequence's first positions
// (each row walks them anew) where a tiled prefill shares them across a
// segment's rows; short segments make that a small cost against a launch
// per segment and layer. (The executor keeps to segments past the
// ResidentExecutorOptions row_form bounds on that work and on the
// tables' size.)
inline constexpr int64_t kRowFormMaxSegmentRows = 64;

struct ResidentPass {
  int64_t rows = 0;
  absl::Span<const PrefillSegment> segments = {};
  const DeviceSlotMap* step = nullptr;
  const PrefixEncoding* prefix = nullptr;
  absl::Span<const DeviceBlockTable* const> kv_tables = {};
  // A step's rows in slots at or past this pad its batch to a bucket
  // (their results are dropped; a mixture routes them to no expert).
  int32_t first_pad_slot = std::numeric_limits<int32_t>::max();
  // A prefill pass's segments on the device (for the *Segments operations
  // that run every segment at once); null for a step.
  const DevicePassSegments* segment_rows = nullptr;
  // A prefill pass as rows (see above); null, and no tables, otherwise.
  const DeviceSlotMap* row_map = nullptr;
  absl::Span<const DeviceBlockTable* const> row_kv_tables = {};

  DevicePassRows step_rows() const { return {rows, 0, step}; }
  // Table `index` of the row form's tables.
  absl::StatusOr<const DeviceBlockTable*> row_kv_table(int index) const {
    return KvTableAt(row_kv_tables, index);
  }
  StepPadRows pad_rows() const { return {step, first_pad_slot}; }
  // Table `index` of the step's kv_tables.
  absl::StatusOr<const DeviceBlockTable*> kv_table(int index) const {
    return KvTableAt(kv_tables, index);
  }
};

// What a mixer's state pool is sized for: `slots` sequences; a paged
// state takes kv_blocks->blocks() blocks, reads the slots' block lists from
// it (the executor owns it; it outlives the mixer) and its pass table at
// the pass's (or segment's) kv_tables[kv_table].
struct ResidentPools {
  int32_t slots = 0;
  const KvBlockTable* kv_blocks = nullptr;
  int kv_table = -1;
};

// A layer's input: the residual stream x [rows, dim] and the RMSNorm that
// makes the layer's h [rows, dim] of it. A layer starts with Project (its
// first products of h, the norm applied in the same call:
// ExecutorDevice::RmsNormLinears) or, when its first work is not a product
// of h, with Normalize; after either, h holds the normalized rows.
// Normalized(h) is rows normalized already (an MoE's shared expert, its
// routed rows): Project is Linears of h, Normalize does nothing.
struct LayerInput {
  DeviceFloats x;
  int64_t rows = 0;
  int64_t dim = 0;
  DeviceFloats norm_weight;  // [dim]; empty: h is normalized already
  float eps = 0.0f;
  DeviceFloats h;

  static LayerInput Normalized(DeviceFloats h, int64_t rows, int64_t dim) {
    return {h, rows, dim, {}, 0.0f, h};
  }
  [[nodiscard]] absl::Status Project(
      ExecutorDevice& device, absl::Span<const LinearOutput> outputs) const {
    if (norm_weight.size == 0) return device.Linears(h, rows, outputs);
    return device.RmsNormLinears(x, rows, dim, norm_weight, eps, h, outputs);
  }
  [[nodiscard]] absl::Status Normalize(ExecutorDevice& device) const {
    if (norm_weight.size == 0) return absl::OkStatus();
    return device.RmsNorm(x, rows, dim, norm_weight, eps, h);
  }
};

// What every resident layer's last projection does: x += s · (h · W^T (+
// bias)), s the model's residual scale (set by the executor before Load).
class ResidualWriter {
 public:
  void set_residual_scale(float scale) { residual_scale_ = scale; }
  float residual_scale() const { return residual_scale_; }

 protected:
  LinearEpilogue ResidualAdd(DeviceFloats bias = {}) const {
    return LinearEpilogue{bias, /*accumulate=*/true, residual_scale_};
  }

 private:
  float residual_scale_ = 1.0f;
};

class ResidentMixer : public ResidualWriter {
 public:
  virtual ~ResidentMixer() = default;

  // Uploads the weights and allocates the state pool.
  [[nodiscard]] virtual absl::Status Load(ExecutorDevice& device,
                                          const ResidentPools& pools) = 0;
  // 0 for a fixed-size state; for a state that grows by rows in blocks of
  // ResidentPools::kv_blocks (reserved by the executor before a pass or an
  // Upload), the tokens per row: 1 for a KV cache, L for RAT's chunks.
  virtual int64_t kv_tokens_per_row() const { return 0; }
  // Whether Forward reads a prefill pass given as rows (ResidentPass::
  // row_map) that way; the executor uploads the row form only for models
  // with such a layer.
  virtual bool reads_pass_rows() const { return false; }
  virtual int64_t ScratchFloats(int64_t rows) const = 0;
  virtual int64_t weight_bytes() const = 0;
  // A fixed state's floats per slot; a paged state's floats per row.
  virtual int64_t state_floats_per_slot() const = 0;

  [[nodiscard]] virtual absl::Status ZeroSlot(ExecutorDevice& device,
                                              int32_t slot) = 0;
  // FAILED_PRECONDITION unless `state` is this mixer's kind and shape, and
  // has read `tokens` tokens where it counts them (tokens < 0: the count
  // is not checked).
  [[nodiscard]] virtual absl::Status CheckState(const LayerState& state,
                                                int64_t tokens) const = 0;
  // The host state (checked) into the slot.
  [[nodiscard]] virtual absl::Status Upload(ExecutorDevice& device,
                                            const LayerState& state,
                                            int32_t slot) = 0;
  // Sizes the host state (checked) for the slot's contents and appends the
  // copies that bring them there; the executor runs every layer's copies
  // at once (ExecutorDevice::CopyAllToHost). `tokens` is the sequence's
  // token count.
  [[nodiscard]] virtual absl::Status AddDownloads(
      int32_t slot, int64_t tokens, LayerState& state,
      std::vector<HostCopy>& copies) = 0;

  // x [rows, d] += Mixer(h [rows, d]), h made of `in` (in.x is x); the
  // pass's states advance.
  [[nodiscard]] virtual absl::Status Forward(ExecutorDevice& device,
                                             const ResidentPass& pass,
                                             const LayerInput& in,
                                             DeviceFloats scratch,
                                             DeviceFloats x) = 0;
};

class ResidentFeedForward : public ResidualWriter {
 public:
  virtual ~ResidentFeedForward() = default;

  [[nodiscard]] virtual absl::Status Load(ExecutorDevice& device) = 0;
  virtual int64_t ScratchFloats(int64_t rows) const = 0;
  virtual int64_t weight_bytes() const = 0;
  // x [rows, d] += FFN(h [rows, d]), h made of `in` (in.x is x). A
  // decode step's work (pass.step set) must not need the host in its
  // middle, so that the step can be recorded as a device graph.
  [[nodiscard]] virtual absl::Status Forward(ExecutorDevice& device,
                                             const ResidentPass& pass,
                                             const LayerInput& in,
                                             DeviceFloats scratch,
                                             DeviceFloats x) = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_RESIDENT_LAYER_H_
