// StepGraphs: a resident executor's decode steps recorded as device graphs,
// one per batch size. A step of B sequences queues a few hundred small
// kernels; on a GPU at small B the host's launching them, not the device,
// sets the step's time, and a graph replays them all in one launch.
//
// Each batch size has its DeviceStep (the step's inputs and sampled ids in
// buffers that stay put). Until a step of that size has run as it is
// (which also sizes the device's scratch for that batch, so that recording
// allocates nothing), its steps run as they are; the next one is recorded
// (Capture) and launched; later ones replay the graph on the refilled
// inputs. A graph recorded before the device's layout changed (a scratch
// block grew, ExecutorDevice::layout_generation) is recorded again. A
// device without graphs (UNIMPLEMENTED) turns recording off for good
// (status() says why); a batch size whose recording fails twice runs as it
// is from then on, the others keep theirs.
//
// A model that pages its states (full attention, RAT) reads block tables
// that change every step; each batch size keeps its own tables, refilled
// in place every step (FillTables) so a graph reads them where they were
// recorded. A table is made wider than its rows need (the next power of
// two, at least kMinTableWidth blocks); only when a sequence outgrows it
// is it made anew, and the size's graph recorded again: a few times over a
// sequence's life, not every step.
// Not thread-safe: the executor calls it under its lock.
#ifndef TWICE_ENGINE_EXECUTOR_STEP_GRAPHS_H_
#define TWICE_ENGINE_EXECUTOR_STEP_GRAPHS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/kv_block_table.h"

namespace twice::engine {

// What a batch size's next step does.
enum class StepAction { kRunAsIs, kRecord, kReplay };

// The state of one batch size that the choice reads.
struct StepRecordState {
  bool has_graph = false;
  int64_t graph_generation = 0;  // StepGraphs::Generation when recorded
  int64_t runs_as_is = 0;        // steps that ran as they are and succeeded
  int64_t failed_recordings = 0;
};

// The rows a step of `rows` runs as when padded to a bucket (so that a
// few recorded graphs serve every batch size): every size up to 8, then
// multiples of 8 up to 64, of 16 up to 256 and of 64 beyond; at most
// `limit` (and never fewer than `rows`).
int64_t StepBucketRows(int64_t rows, int64_t limit);

// kReplay when the batch size has a graph recorded at `generation` (its
// current StepGraphs::Generation); kRecord when recording is on, a step of
// that size has run as it is, and its recording has failed fewer than
// twice; else kRunAsIs.
StepAction ChooseStepAction(bool record, const StepRecordState& state,
                            int64_t generation);

class StepGraphs {
 public:
  // At most this many graphs are kept (the least recently used goes): as
  // many as the decode loop's largest batch has sizes.
  static constexpr int kMaxGraphs = 64;

  // `record`: whether steps may be recorded at all.
  explicit StepGraphs(bool record);

  // The narrowest step table: blocks for the first few hundred tokens.
  static constexpr int64_t kMinTableWidth = 8;
  // The width a step table is made with for rows of `width` blocks.
  static int64_t TableWidthFor(int64_t width);

  // The step buffers of batch size `rows` (made on first use).
  [[nodiscard]] absl::StatusOr<DeviceStep*> StepFor(ExecutorDevice& device,
                                                    int64_t rows);
  // The step tables of batch size `rows` (StepFor called before) refilled
  // with `tables` (one per paged table of the model, in order), in order.
  [[nodiscard]] absl::StatusOr<std::vector<const DeviceBlockTable*>> FillTables(
      ExecutorDevice& device, int64_t rows,
      absl::Span<const BlockTableRows> tables);
  // What a graph of batch size `rows` must have been recorded at to be
  // replayed: the device's layout and the size's table moves together.
  int64_t Generation(const ExecutorDevice& device, int64_t rows) const;

  // Runs the step of batch size `rows` (StepFor called before), whose
  // work `work` queues: replayed, recorded, or run as it is (above).
  [[nodiscard]] absl::Status Run(ExecutorDevice& device, int64_t rows,
                                 absl::FunctionRef<absl::Status()> work);

  // OK while recording is on; else why it is off.
  const absl::Status& status() const { return status_; }
  int graphs() const;
  // Graphs recorded so far (a count far above graphs() means sizes come
  // and go faster than kMaxGraphs keeps them).
  int64_t recordings() const { return recordings_; }

 private:
  struct Entry {
    std::unique_ptr<DeviceStep> step;
    std::unique_ptr<DeviceGraph> graph;
    StepRecordState state;
    uint64_t last_use = 0;
    std::vector<std::unique_ptr<DeviceBlockTable>> tables;
    int64_t table_moves = 0;  // tables made anew (a graph reading one is stale)
  };
  // Drops the least recently used graph while kMaxGraphs are kept.
  void MakeRoom();

  bool record_;
  absl::Status status_;
  std::map<int64_t, Entry> entries_;  // by batch size
  uint64_t clock_ = 0;
  int64_t recordings_ = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_STEP_GRAPHS_H_
