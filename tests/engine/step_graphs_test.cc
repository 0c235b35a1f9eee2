// The choice StepGraphs makes for a batch size's next decode step
// (ChooseStepAction): run as it is until one has, then record, then
// replay while the device's layout holds; record again after it changed;
// give up on a size after two failed recordings; never record with
// recording off. And on the CPU device, which records no graphs, the
// executor-facing object: buffers per batch size, recording off after the
// first attempt with the device's UNIMPLEMENTED, and step tables that
// stay put while their rows fit and are made anew (a new generation) when
// they do not. (Recording and replaying on a GPU:
// tests/cuda_engine/step_graphs_cuda_test.cc.)
#include "engine/executor/step_graphs.h"

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

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

TEST(StepBucketRowsTest, AFewBucketsServeEveryBatchSize) {
  for (int64_t rows = 1; rows <= 8; ++rows) {
    EXPECT_EQ(StepBucketRows(rows, 256), rows);
  }
  EXPECT_EQ(StepBucketRows(9, 256), 16);
  EXPECT_EQ(StepBucketRows(64, 256), 64);
  EXPECT_EQ(StepBucketRows(65, 256), 80);
  EXPECT_EQ(StepBucketRows(250, 256), 256);
  EXPECT_EQ(StepBucketRows(257, 1024), 320);
  // Capped by the executor's rows, never below the batch.
  EXPECT_EQ(StepBucketRows(9, 12), 12);
  EXPECT_EQ(StepBucketRows(60, 50), 60);
  // Batches of 1..256 use 27 sizes: under StepGraphs::kMaxGraphs.
  std::set<int64_t> sizes;
  for (int64_t rows = 1; rows <= 256; ++rows) {
    const int64_t b = StepBucketRows(rows, 256);
    EXPECT_GE(b, rows);
    EXPECT_LE(b - rows, std::max<int64_t>(rows / 2, 7)) << rows;
    sizes.insert(b);
  }
  EXPECT_EQ(sizes.size(), 27u);
  EXPECT_LE(static_cast<int>(sizes.size()), StepGraphs::kMaxGraphs);
}

TEST(StepGraphsTest, TableWidthsGrowByDoubling) {
  EXPECT_EQ(StepGraphs::TableWidthFor(1), StepGraphs::kMinTableWidth);
  EXPECT_EQ(StepGraphs::TableWidthFor(8), 8);
  EXPECT_EQ(StepGraphs::TableWidthFor(9), 16);
  EXPECT_EQ(StepGraphs::TableWidthFor(1000), 1024);
}

TEST(StepGraphsTest, StepTablesStayPutUntilTheirRowsOutgrowThem) {
  std::unique_ptr<ExecutorDevice> cpu = NewCpuExecutorDevice();
  StepGraphs graphs(/*record=*/true);
  ASSERT_OK(graphs.StepFor(*cpu, 2).status());
  const int64_t start = graphs.Generation(*cpu, 2);
  // Two paged tables of a model (rows per token, rows per chunk).
  const std::vector<BlockTableRows> first = {{{4, 7, 9, -1}, 2}, {{3, 5}, 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<const DeviceBlockTable*> t1,
                       graphs.FillTables(*cpu, 2, first));
  ASSERT_EQ(t1.size(), 2u);
  EXPECT_EQ(t1[0]->width(), StepGraphs::kMinTableWidth);
  const std::vector<int32_t> padded = {4, 7,  -1, -1, -1, -1, -1, -1,
                                       9, -1, -1, -1, -1, -1, -1, -1};
  EXPECT_EQ(
      std::vector<int32_t>(t1[0]->blocks().begin(), t1[0]->blocks().end()),
      padded);
  const int64_t made = graphs.Generation(*cpu, 2);
  EXPECT_GT(made, start);

  // Rows that still fit: the same tables, refilled; the generation holds.
  const std::vector<BlockTableRows> second = {{{4, 7, 2, 9, 1, 6}, 3},
                                              {{3, 5}, 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<const DeviceBlockTable*> t2,
                       graphs.FillTables(*cpu, 2, second));
  EXPECT_EQ(t2, t1);
  EXPECT_EQ(t2[0]->blocks()[2], 2);
  EXPECT_EQ(t2[0]->blocks()[8 + 2], 6);
  EXPECT_EQ(graphs.Generation(*cpu, 2), made);

  // A row of nine blocks outgrows the first table: made anew, wider.
  BlockTableRows wide{std::vector<int32_t>(18, 1), 9};
  const std::vector<BlockTableRows> third = {wide, {{3, 5}, 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<const DeviceBlockTable*> t3,
                       graphs.FillTables(*cpu, 2, third));
  EXPECT_EQ(t3[0]->width(), 16);
  EXPECT_EQ(t3[1], t1[1]);
  EXPECT_GT(graphs.Generation(*cpu, 2), made);
  // Another batch size has tables of its own.
  ASSERT_OK(graphs.StepFor(*cpu, 1).status());
  const std::vector<BlockTableRows> single = {{{8}, 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<const DeviceBlockTable*> one,
                       graphs.FillTables(*cpu, 1, single));
  EXPECT_NE(one[0], t3[0]);
  // Rows of another batch size, and a size without buffers, are refused.
  EXPECT_EQ(graphs.FillTables(*cpu, 1, first).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(graphs.FillTables(*cpu, 5, first).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ExecutorDeviceTablesTest, FillBlockTableRefusesWhatDoesNotFit) {
  std::unique_ptr<ExecutorDevice> cpu = NewCpuExecutorDevice();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceBlockTable> table,
                       cpu->UploadBlockTable({1, 2, 3, 4, 5, 6}, 3));
  const std::vector<int32_t> before(table->blocks().begin(),
                                    table->blocks().end());
  // Wider than the table, another row count, not whole rows.
  EXPECT_EQ(cpu->FillBlockTable(*table, {1, 2, 3, 4, 5, 6, 7, 8}, 4).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu->FillBlockTable(*table, {1, 2, 3}, 3).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu->FillBlockTable(*table, {1, 2, 3}, 2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      std::vector<int32_t>(table->blocks().begin(), table->blocks().end()),
      before);
  ASSERT_OK(cpu->FillBlockTable(*table, {8, 9}, 1));
  EXPECT_EQ(
      std::vector<int32_t>(table->blocks().begin(), table->blocks().end()),
      (std::vector<int32_t>{8, -1, -1, 9, -1, -1}));
  EXPECT_EQ(table->width(), 3);
}

}  // namespace
}  // namespace twice::engine
