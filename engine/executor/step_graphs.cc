#include "engine/executor/step_graphs.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/status_macros.h"

namespace twice::engine {

int64_t StepBucketRows(int64_t rows, int64_t limit) {
  // Coarser as batches grow: a padded row costs a smaller share of a big
  // step, whose time the device's work sets rather than its launches.
  const int64_t step = rows <= 8 ? 1 : rows <= 64 ? 8 : rows <= 256 ? 16 : 64;
  const int64_t bucket = (rows + step - 1) / step * step;
  return std::max(rows, std::min(bucket, limit));
}

StepAction ChooseStepAction(bool record, const StepRecordState& state,
                            int64_t generation) {
  if (!record) return StepAction::kRunAsIs;
  if (state.has_graph && state.graph_generation == generation) {
    return StepAction::kReplay;
  }
  if (state.runs_as_is == 0 || state.failed_recordings >= 2) {
    return StepAction::kRunAsIs;
  }
  return StepAction::kRecord;
}

StepGraphs::StepGraphs(bool record)
    : record_(record),
      status_(record ? absl::OkStatus()
                     : absl::FailedPreconditionError(
                           "step graphs are off for this executor")) {}

absl::StatusOr<DeviceStep*> StepGraphs::StepFor(ExecutorDevice& device,
                                                int64_t rows) {
  Entry& e = entries_[rows];
  if (e.step == nullptr) {
    absl::StatusOr<std::unique_ptr<DeviceStep>> step = device.NewStep(rows);
    if (!step.ok()) {
      entries_.erase(rows);
      return step.status();
    }
    e.step = *std::move(step);
  }
  e.last_use = ++clock_;
  return e.step.get();
}

int64_t StepGraphs::TableWidthFor(int64_t width) {
  int64_t w = kMinTableWidth;
  while (w < width) w *= 2;
  return w;
}

absl::StatusOr<std::vector<const DeviceBlockTable*>> StepGraphs::FillTables(
    ExecutorDevice& device, int64_t rows,
    absl::Span<const BlockTableRows> tables) {
  auto it = entries_.find(rows);
  if (it == entries_.end()) {
    return absl::FailedPreconditionError("StepGraphs: no step of that size");
  }
  Entry& e = it->second;
  if (e.tables.size() != tables.size()) {
    e.tables.clear();
    e.tables.resize(tables.size());
  }
  std::vector<const DeviceBlockTable*> views;
  for (size_t i = 0; i < tables.size(); ++i) {
    const BlockTableRows& t = tables[i];
    std::unique_ptr<DeviceBlockTable>& table = e.tables[i];
    if (table == nullptr || table->width() < t.width) {
      // Made anew (empty rows of the new width), so a graph that read the
      // old one is stale.
      const int64_t width = TableWidthFor(t.width);
      const std::vector<int32_t> empty(static_cast<size_t>(rows * width), -1);
      absl::StatusOr<std::unique_ptr<DeviceBlockTable>> made =
          device.UploadBlockTable(empty, width);
      if (!made.ok()) {
        e.tables.clear();
        return made.status();
      }
      table = *std::move(made);
      ++e.table_moves;
    }
    TWICE_RETURN_IF_ERROR(device.FillBlockTable(*table, t.blocks, t.width));
    views.push_back(table.get());
  }
  return views;
}

int64_t StepGraphs::Generation(const ExecutorDevice& device,
                               int64_t rows) const {
  auto it = entries_.find(rows);
  // Both counters only grow, so their sum changes whenever either does.
  return device.layout_generation() +
         (it != entries_.end() ? it->second.table_moves : 0);
}

absl::Status StepGraphs::Run(ExecutorDevice& device, int64_t rows,
                             absl::FunctionRef<absl::Status()> work) {
  auto it = entries_.find(rows);
  if (it == entries_.end() || it->second.step == nullptr) {
    return absl::FailedPreconditionError("StepGraphs: no step of that size");
  }
  Entry& e = it->second;
  const int64_t generation = Generation(device, rows);
  switch (ChooseStepAction(record_, e.state, generation)) {
    case StepAction::kReplay:
      return device.Launch(*e.graph);
    case StepAction::kRunAsIs: {
      absl::Status ran = work();
      if (ran.ok()) ++e.state.runs_as_is;
      return ran;
    }
    case StepAction::kRecord:
      break;
  }
  e.graph.reset();
  e.state.has_graph = false;
  MakeRoom();
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = device.Capture(work);
  if (!graph.ok()) {
    // Nothing ran: the step runs as it is now.
    if (absl::IsUnimplemented(graph.status())) {
      record_ = false;  // the device has no graphs
      status_ = graph.status();
    } else {
      ++e.state.failed_recordings;
    }
    return work();
  }
  if (Generation(device, rows) != generation) {
    // Recording moved a buffer after all: the graph may read the old one.
    ++e.state.failed_recordings;
    return work();
  }
  ++recordings_;
  e.graph = *std::move(graph);
  e.state.has_graph = true;
  e.state.graph_generation = generation;
  return device.Launch(*e.graph);
}

int StepGraphs::graphs() const {
  int n = 0;
  for (const auto& [rows, e] : entries_) n += e.graph != nullptr ? 1 : 0;
  return n;
}

void StepGraphs::MakeRoom() {
  while (graphs() >= kMaxGraphs) {
    Entry* oldest = nullptr;
    for (auto& [rows, e] : entries_) {
      if (e.graph != nullptr &&
          (oldest == nullptr || e.last_use < oldest->last_use)) {
        oldest = &e;
      }
    }
    oldest->graph.reset();
    oldest->state.has_graph = false;
  }
}

}  // namespace twice::engine
