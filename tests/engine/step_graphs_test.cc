// The choice StepGraphs makes for a batch size's next decode step
// (ChooseStepAction): run as it is until one has, then record, then
// replay while the device's layout holds; record again after it changed;
// give up on a size after two failed recordings; never record with
// recording off. And on the CPU device, which records no graphs, the
// executor-facing object: buffers per batch size, recording off after the
// first attempt with the device's UNIMPLEMENTED. (Recording and replaying
// on a GPU: tests/cuda_engine/resident_executor_cuda_test.cc.)
#include "engine/executor/step_graphs.h"

#include <memory>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

TEST(ChooseStepActionTest, FollowsTheLifeOfABatchSize) {
  StepRecordState s;
  EXPECT_EQ(ChooseStepAction(true, s, 0), StepAction::kRunAsIs);
  s.runs_as_is = 1;
  EXPECT_EQ(ChooseStepAction(true, s, 0), StepAction::kRecord);
  s.has_graph = true;
  s.graph_generation = 3;
  EXPECT_EQ(ChooseStepAction(true, s, 3), StepAction::kReplay);
  // A scratch block grew: the graph reads the old one.
  EXPECT_EQ(ChooseStepAction(true, s, 4), StepAction::kRecord);
  s.has_graph = false;
  s.failed_recordings = 1;
  EXPECT_EQ(ChooseStepAction(true, s, 4), StepAction::kRecord);
  s.failed_recordings = 2;
  EXPECT_EQ(ChooseStepAction(true, s, 4), StepAction::kRunAsIs);
}

TEST(ChooseStepActionTest, NothingIsRecordedOrReplayedWithRecordingOff) {
  StepRecordState s;
  s.runs_as_is = 5;
  s.has_graph = true;
  EXPECT_EQ(ChooseStepAction(false, s, 0), StepAction::kRunAsIs);
}

TEST(StepGraphsTest, OnTheCpuRecordingEndsWithTheDevicesAnswer) {
  std::unique_ptr<ExecutorDevice> cpu = NewCpuExecutorDevice();
  StepGraphs graphs(/*record=*/true);
  EXPECT_OK(graphs.status());
  ASSERT_OK_AND_ASSIGN(DeviceStep * two, graphs.StepFor(*cpu, 2));
  ASSERT_OK_AND_ASSIGN(DeviceStep * again, graphs.StepFor(*cpu, 2));
  EXPECT_EQ(two, again);  // one buffer set per batch size
  ASSERT_OK_AND_ASSIGN(DeviceStep * three, graphs.StepFor(*cpu, 3));
  EXPECT_NE(two, three);
  EXPECT_EQ(three->rows(), 3);
  int runs = 0;
  auto work = [&runs] {
    ++runs;
    return absl::OkStatus();
  };
  ASSERT_OK(graphs.Run(*cpu, 2, work));  // runs as it is
  EXPECT_OK(graphs.status());
  ASSERT_OK(graphs.Run(*cpu, 2, work));  // recording refused: runs
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(absl::IsUnimplemented(graphs.status())) << graphs.status();
  ASSERT_OK(graphs.Run(*cpu, 3, work));
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(graphs.graphs(), 0);
  EXPECT_EQ(graphs.recordings(), 0);
  // A size without buffers, and work that fails, say so.
  EXPECT_EQ(graphs.Run(*cpu, 4, work).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(graphs.Run(*cpu, 3, [] { return absl::InternalError("x"); }).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(graphs.StepFor(*cpu, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::engine
