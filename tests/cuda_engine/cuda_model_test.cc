// Whole models with the CUDA kernel backend against the same models on the
// CPU: every architecture the engine loads (random-weight tiny presets and
// the trained models under models/), prefill, recurrent steps, batched
// steps and the JRT prefix read. GEMMs run in bf16 on the device, so logits
// are compared by the norm-wise relative error with a bf16 tolerance over
// the whole stack (3e-2), and a state written on the GPU must continue on
// the CPU and the reverse, through the state codec as the store keeps it.
// Models load as the server loads them by default (weights as stored: the
// golden checkpoints' bf16 / f16 projections go to the GPU as they are).
// Every test asserts the device ran its work (per-op counters), so a
// declined op cannot pass by comparing the CPU with itself. SKIPPED without
// a GPU.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_kernel_backend.h"
#include "kernels/cuda/device_info.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda_engine/random_test_model.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using kernels::cuda::CudaKernelBackend;
using kernels::cuda::testing::RelativeError;

constexpr double kModelTolerance = 3e-2;

struct ModelCase {
  std::string name;
  std::string dir;           // a shipped model, or empty
  std::string architecture;  // random weights otherwise
  std::string preset;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

std::vector<ModelCase> Cases() {
  return {
      {"based-tiny", "", "based", "tiny"},
      {"jrt-tiny", "", "jrt", "tiny"},
      {"mamba2-tiny", "", "mamba2", "tiny"},
      {"llama-tiny", "", "llama", "tiny"},
      {"rat-tiny", "", "rat", "tiny"},
      {"rat-tiny-swa", "", "rat", "tiny-swa"},
      {"based-qa", "models/based-qa", "", ""},
      {"jrt-qa", "models/jrt-qa", "", ""},
      {"mamba2-qa", "models/mamba2-qa", "", ""},
      {"llama-qa", "models/llama-qa", "", ""},
  };
}

class CudaModelTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    if (kernels::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<std::shared_ptr<CudaKernelBackend>> backend =
        CudaKernelBackend::Create(0);
    ASSERT_OK(backend);
    backend_ = *backend;
    const ModelCase& c = GetParam();
    std::string dir = c.dir;
    if (dir.empty()) {
      ASSERT_OK_AND_ASSIGN(dir,
                           WriteRandomTestModel("twice-cuda-model-" + c.name,
                                                c.architecture, c.preset));
      cleanup_ = dir;
    }
    absl::StatusOr<std::unique_ptr<Model>> model = LoadModel(dir);
    ASSERT_OK(model);
    model_ = *std::move(model);
  }
  void TearDown() override {
    kernels::SetKernelBackend(nullptr);
    if (!cleanup_.empty()) std::filesystem::remove_all(cleanup_);
  }

  std::vector<int32_t> RandomTokens(int64_t n, uint32_t salt) const {
    return kernels::cuda::testing::RandomTokenIds(
        n, model_->description().vocab_size, salt);
  }

  // Prefill, then three steps; every logits row, concatenated.
  std::vector<float> Run(const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& steps,
                         SequenceState& state, PrefillMode mode) const {
    std::vector<float> all;
    absl::StatusOr<std::vector<float>> logits =
        model_->Prefill(prompt, state, mode);
    EXPECT_OK(logits);
    if (!logits.ok()) return all;
    all = *logits;
    for (int32_t t : steps) {
      absl::StatusOr<std::vector<float>> step = model_->Step(t, state);
      EXPECT_OK(step);
      if (!step.ok()) return all;
      all.insert(all.end(), step->begin(), step->end());
    }
    return all;
  }

  // Device calls since `before` (a snapshot of backend_->stats()).
  int64_t DeviceCallsSince(const kernels::KernelBackendStats& before) const {
    return backend_->stats().device_calls - before.device_calls;
  }
  int64_t LinearOnDeviceSince(const kernels::KernelBackendStats& before) const {
    return backend_->stats().op(kernels::KernelOp::kLinear).device_calls -
           before.op(kernels::KernelOp::kLinear).device_calls;
  }

  std::shared_ptr<CudaKernelBackend> backend_;
  std::unique_ptr<Model> model_;
  std::string cleanup_;
};

TEST_P(CudaModelTest, PrefillAndStepsMatchCpu) {
  // Long enough to cross RAT chunks and sliding windows, several chunks of
  // the chunked scans.
  const std::vector<int32_t> prompt = RandomTokens(150, 1);
  const std::vector<int32_t> steps = RandomTokens(3, 2);
  std::unique_ptr<SequenceState> cpu_state = model_->NewState();
  const std::vector<float> cpu =
      Run(prompt, steps, *cpu_state, PrefillMode::kCausal);
  kernels::SetKernelBackend(backend_);
  std::unique_ptr<SequenceState> gpu_state = model_->NewState();
  const std::vector<float> gpu =
      Run(prompt, steps, *gpu_state, PrefillMode::kCausal);
  EXPECT_LE(RelativeError(gpu, cpu), kModelTolerance);
  EXPECT_GT(backend_->stats().device_calls, 0);
  EXPECT_GT(backend_->cached_weight_bytes(), 0) << "weights never cached";

  EXPECT_GT(LinearOnDeviceSince({}), 0) << "no projection ran on the GPU";

  // A state the GPU wrote, stored and loaded, continues on the CPU like the
  // CPU's own, and a CPU state continues on the GPU.
  auto reload = [&](const SequenceState& state) {
    std::unique_ptr<SequenceState> copy = model_->NewState();
    EXPECT_OK(DecodeStateInto(EncodeState(state), *copy));
    return copy;
  };
  std::unique_ptr<SequenceState> gpu_stored = reload(*gpu_state);
  std::unique_ptr<SequenceState> cpu_stored = reload(*cpu_state);
  const std::vector<int32_t> more = RandomTokens(5, 3);
  kernels::SetKernelBackend(nullptr);
  absl::StatusOr<std::vector<float>> gpu_then_cpu =
      model_->Prefill(more, *gpu_stored, PrefillMode::kCausal);
  absl::StatusOr<std::vector<float>> from_cpu =
      model_->Prefill(more, *cpu_state, PrefillMode::kCausal);
  kernels::SetKernelBackend(backend_);
  const kernels::KernelBackendStats before = backend_->stats();
  absl::StatusOr<std::vector<float>> cpu_then_gpu =
      model_->Prefill(more, *cpu_stored, PrefillMode::kCausal);
  EXPECT_GT(DeviceCallsSince(before), 0);
  ASSERT_OK(gpu_then_cpu);
  ASSERT_OK(from_cpu);
  ASSERT_OK(cpu_then_gpu);
  EXPECT_LE(RelativeError(*gpu_then_cpu, *from_cpu), kModelTolerance);
  EXPECT_LE(RelativeError(*cpu_then_gpu, *from_cpu), kModelTolerance);
}

TEST_P(CudaModelTest, WeightsAreUploadedOnce) {
  const std::vector<int32_t> prompt = RandomTokens(40, 4);
  kernels::SetKernelBackend(backend_);
  std::unique_ptr<SequenceState> first = model_->NewState();
  ASSERT_OK(model_->Prefill(prompt, *first, PrefillMode::kCausal));
  const int64_t cached = backend_->cached_weight_bytes();
  EXPECT_GT(cached, 0) << "no weight reached the device";
  const kernels::KernelBackendStats before = backend_->stats();
  std::unique_ptr<SequenceState> second = model_->NewState();
  ASSERT_OK(model_->Prefill(prompt, *second, PrefillMode::kCausal));
  EXPECT_GT(LinearOnDeviceSince(before), 0);
  EXPECT_EQ(backend_->cached_weight_bytes(), cached);
  EXPECT_EQ(backend_->stats().weight_bytes_to_device,
            before.weight_bytes_to_device)
      << "a weight was uploaded again";
}

TEST_P(CudaModelTest, BatchedStepsMatchCpu) {
  const std::vector<int32_t> tokens = RandomTokens(3, 5);
  auto batched = [&] {
    std::vector<std::unique_ptr<SequenceState>> owned;
    std::vector<SequenceState*> states;
    for (int b = 0; b < 3; ++b) {
      owned.push_back(model_->NewState());
      EXPECT_TRUE(model_
                      ->Prefill(RandomTokens(20 + 7 * b, 10 + b), *owned.back(),
                                PrefillMode::kCausal)
                      .ok());
      states.push_back(owned.back().get());
    }
    absl::StatusOr<std::vector<float>> rows = model_->StepBatch(tokens, states);
    EXPECT_OK(rows);
    return rows.ok() ? *rows : std::vector<float>();
  };
  const std::vector<float> cpu = batched();
  kernels::SetKernelBackend(backend_);
  const kernels::KernelBackendStats before = backend_->stats();
  const std::vector<float> gpu = batched();
  EXPECT_GT(LinearOnDeviceSince(before), 0);
  EXPECT_LE(RelativeError(gpu, cpu), kModelTolerance);
}

// 64 sequences stepping at once from 64 threads (the backend's lanes run
// them concurrently) get exactly the greedy tokens each gets alone.
TEST_P(CudaModelTest, ConcurrentSequencesGetTheirOwnTokens) {
  constexpr int kSequences = 64;
  constexpr int kSteps = 4;
  kernels::SetKernelBackend(backend_);
  auto greedy = [&](int s) {
    std::vector<int32_t> tokens;
    std::unique_ptr<SequenceState> state = model_->NewState();
    absl::StatusOr<std::vector<float>> logits = model_->Prefill(
        RandomTokens(10 + s % 7, 100 + s), *state, PrefillMode::kCausal);
    for (int step = 0; step < kSteps && logits.ok(); ++step) {
      int32_t best = 0;
      for (int32_t i = 1; i < model_->description().vocab_size; ++i) {
        if ((*logits)[i] > (*logits)[best]) best = i;
      }
      tokens.push_back(best);
      logits = model_->Step(best, *state);
    }
    EXPECT_OK(logits);
    return tokens;
  };
  std::vector<std::vector<int32_t>> alone(kSequences);
  for (int s = 0; s < kSequences; ++s) alone[s] = greedy(s);
  const kernels::KernelBackendStats before = backend_->stats();
  std::vector<std::vector<int32_t>> together(kSequences);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSequences; ++s) {
    threads.emplace_back([&, s] { together[s] = greedy(s); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(DeviceCallsSince(before), 0);
  EXPECT_GT(backend_->lanes(), 1) << "the calls never overlapped";
  for (int s = 0; s < kSequences; ++s) {
    EXPECT_EQ(together[s], alone[s]) << "sequence " << s;
  }
}

TEST_P(CudaModelTest, PrefixReadMatchesCpu) {
  if (model_->description().prefix_length == 0) {
    GTEST_SKIP() << "no prefix encoder";
  }
  const std::vector<int32_t> prompt = RandomTokens(50, 6);
  const std::vector<int32_t> steps = RandomTokens(2, 7);
  for (PrefillMode mode : {PrefillMode::kPrefix, PrefillMode::kPrefixReadTwice,
                           PrefillMode::kPrefixUnpadded}) {
    kernels::SetKernelBackend(nullptr);
    std::unique_ptr<SequenceState> cpu_state = model_->NewState();
    const std::vector<float> cpu = Run(prompt, steps, *cpu_state, mode);
    kernels::SetKernelBackend(backend_);
    const kernels::KernelBackendStats before = backend_->stats();
    std::unique_ptr<SequenceState> gpu_state = model_->NewState();
    const std::vector<float> gpu = Run(prompt, steps, *gpu_state, mode);
    // The fused op (feature_dim 16, head_dim 64) or, for other shapes, the
    // featurized kernel it declines to.
    const kernels::KernelBackendStats after = backend_->stats();
    int64_t linear_attention_calls = 0;
    for (const kernels::KernelOp op :
         {kernels::KernelOp::kTaylorLinearAttention,
          kernels::KernelOp::kPrefixLinearAttention}) {
      linear_attention_calls +=
          after.op(op).device_calls - before.op(op).device_calls;
    }
    EXPECT_GT(linear_attention_calls, 0)
        << "the prefix read never reached the device";
    EXPECT_LE(RelativeError(gpu, cpu), kModelTolerance)
        << "mode " << static_cast<int>(mode);
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, CudaModelTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace twice::engine
