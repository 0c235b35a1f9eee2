// Decode steps recorded as CUDA graphs (engine/executor/step_graphs.h,
// the executor's default) against the same steps run as they are, on the
// GPU: the same ids, bit for bit, through batch sizes that change (each
// size's first step runs, its second is recorded, later ones replay) and a
// long prefill in between that grows the device's scratch (graphs recorded
// before are recorded again), and a batch of 11 padded to 16 rows; graph
// launches counted. Models whose layers
// page their states (Llama, RAT) run with blocks of one row, so that their
// sequences outgrow their batch size's step tables within the test (the
// tables are made anew and the graphs recorded again); Granite's mixture
// of experts routes its steps on the device and records them too. A test
// file of its own, with a few small models, so that the device check's
// per-program minute holds it. SKIPPED without a GPU.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sampling.h"
#include "tests/cuda_engine/resident_cuda_fixture.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using StepGraphsCudaTest = ResidentExecutorCudaTest;

TEST_P(StepGraphsCudaTest, RecordedStepsEqualStepsRunAsTheyAre) {
  // The fixture's executors go: these two take blocks of one row.
  gpu_.reset();
  cpu_.reset();
  std::unique_ptr<ResidentExecutor> made[2];
  for (int e = 0; e < 2; ++e) {
    ResidentExecutorOptions options;
    options.slots = 64;
    options.kv_block_size = 1;
    options.step_graphs = e == 0;
    // Both run padded steps (the same GEMM shapes, so the same ids bit for
    // bit); that padding leaves the ids the model's is the CPU tests'.
    options.step_padding = ResidentExecutorOptions::StepPadding::kAlways;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExecutorDevice> device,
                         NewCudaExecutorDevice(0));
    ASSERT_OK_AND_ASSIGN(made[e], ResidentExecutor::Create(
                                      *stacked_, std::move(device), options));
  }
  ResidentExecutor& recording = *made[0];
  ResidentExecutor& plain = *made[1];
  std::vector<std::vector<int32_t>> got[2];
  ResidentExecutor* executors[] = {&recording, &plain};
  // 11 rows run padded to 16 rows.
  const int batches[] = {1, 3, 3, 11, 11, 1, 1, 11, 3, 11};
  constexpr int kSequences = 11;
  for (int e = 0; e < 2; ++e) {
    ResidentExecutor& x = *executors[e];
    std::vector<SlotId> slots;
    std::vector<int32_t> next;
    for (int i = 0; i < kSequences; ++i) {
      ASSERT_OK_AND_ASSIGN(SlotId s, x.NewSequence());
      // The third is long enough that a paged model's steps of three rows
      // split their attention (cuda/paged_splits.h), recorded too.
      ASSERT_OK(x.Prefill(s, Tokens(i == 2 ? 600 : 5 + i, 300 + i)));
      slots.push_back(s);
      next.push_back(Tokens(1, 400 + i)[0]);
    }
    std::vector<kernels::SamplingRule> rules(kSequences);
    for (int i = 0; i < kSequences; ++i) {
      if (i % 3 == 1) {
        rules[i].temperature = 0.9f;
        rules[i].top_p = 0.9f;
        rules[i].seed = 11 + i;
      } else if (i % 3 == 2) {
        rules[i].temperature = 1.2f;
        rules[i].top_k = 20;
        rules[i].seed = 12 + i;
      }
    }
    for (int step = 0; step < 10; ++step) {
      if (step == 6) {
        // A pass of 512 rows: the scratch grows past what the steps used.
        ASSERT_OK_AND_ASSIGN(SlotId s, x.NewSequence());
        ASSERT_OK(x.Prefill(s, Tokens(1500, 500)));
        ASSERT_OK(x.Release(s));
      }
      const int b = batches[step];
      for (auto& r : rules) r.draw = static_cast<uint64_t>(step);
      ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids,
                           x.Step(absl::MakeConstSpan(next).subspan(0, b),
                                  absl::MakeConstSpan(slots).subspan(0, b),
                                  absl::MakeConstSpan(rules).subspan(0, b)));
      for (int i = 0; i < b; ++i) next[i] = ids[i];
      got[e].push_back(ids);
    }
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(plain.device().traffic().graph_launches, 0);
  EXPECT_OK(recording.step_graphs_status());
  EXPECT_GE(recording.device().traffic().graph_launches, 4);
  EXPECT_GE(recording.step_graphs(), 1);
}

INSTANTIATE_TEST_SUITE_P(
    Models, StepGraphsCudaTest,
    ::testing::Values(ExecutorCase{"mamba2_tiny", "", "mamba2", "tiny", false},
                      ExecutorCase{"mamba2_130m_shape", "", "mamba2",
                                   "mamba2-130m-shape", false},
                      ExecutorCase{"based_tiny", "", "based", "tiny", false},
                      ExecutorCase{"jrt_qa", "models/jrt-qa", "", "", true},
                      ExecutorCase{"llama_tiny", "", "llama", "tiny", false},
                      ExecutorCase{"rat_tiny", "", "rat", "tiny", false},
                      ExecutorCase{"granite_tiny_moe", "", "granitemoehybrid",
                                   "tiny-moe", false}),
    [](const ::testing::TestParamInfo<ExecutorCase>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace twice::engine
