#include "engine/executor/step_graphs.h"

#include <utility>

#include "kernels/status_macros.h"

namespace twice::engine {

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

absl::Status StepGraphs::Run(ExecutorDevice& device, int64_t rows,
                             absl::FunctionRef<absl::Status()> work) {
  auto it = entries_.find(rows);
  if (it == entries_.end() || it->second.step == nullptr) {
    return absl::FailedPreconditionError("StepGraphs: no step of that size");
  }
  Entry& e = it->second;
  if (!record_) return work();
  const int64_t generation = device.layout_generation();
  if (e.graph != nullptr && e.generation == generation) {
    return device.Launch(*e.graph);
  }
  e.graph.reset();
  // The first step of a batch size runs as it is: it sizes the device's
  // scratch for this batch, so that recording allocates nothing.
  if (e.runs++ == 0) return work();
  MakeRoom();
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = device.Capture(work);
  if (!graph.ok()) {
    // Nothing ran: the step runs as it is. When it runs, only its
    // recording failed, and every later step runs as it is too; when it
    // fails as well, the work itself was at fault.
    absl::Status ran = work();
    if (ran.ok()) {
      record_ = false;
      status_ = graph.status();
    }
    return ran;
  }
  if (device.layout_generation() != generation) {
    // Recording moved a buffer after all: the graph may read the old one.
    return work();
  }
  e.graph = *std::move(graph);
  e.generation = generation;
  return device.Launch(*e.graph);
}

void StepGraphs::Disable(absl::Status why) {
  record_ = false;
  status_ = std::move(why);
  for (auto& [rows, e] : entries_) e.graph.reset();
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
  }
}

}  // namespace twice::engine
