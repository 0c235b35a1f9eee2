// ResidentExecutor on the CUDA device against the same executor on the CPU
// device (whose logic and equations engine/resident_executor_test.cc and
// the goldens of every architecture check): weights resident in bf16,
// states in device slots, JRT's prefix reads, the step's sampling on the
// device. GEMMs run in bf16, so logits are compared by the norm-wise
// relative error with the whole-model bf16 tolerance of cuda_model_test.cc
// (3e-2); the rows' GPU-vs-CPU top-1
// agreement and mean KL divergence are printed, and on the shipped
// (trained) model required to be >= 90 % and <= 0.05 nats, with greedy
// continuations the same alone and in a batch of 64. A state read on the
// GPU continues on the CPU through the state codec, and the reverse. The
// CUDA executor device has no CPU fallback; each test asserts its name and
// uploaded weight bytes (the device ran). Decode steps recorded as graphs
// give the ids of the same steps run as they are. SKIPPED without a GPU.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/executor/resident_executor.h"
#include "engine/models/init_model.h"
#include "engine/models/stacked_model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_info.h"
#include "kernels/sampling.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using kernels::cuda::testing::RelativeError;

constexpr double kExecutorTolerance = 3e-2;

struct ExecutorCase {
  std::string name;
  std::string dir;           // a shipped model, or empty for random weights
  std::string architecture;  // and preset of the random weights
  std::string preset;
  bool trained = false;
};

void PrintTo(const ExecutorCase& c, std::ostream* os) { *os << c.name; }

class ResidentExecutorCudaTest : public ::testing::TestWithParam<ExecutorCase> {
 protected:
  void SetUp() override {
    if (kernels::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    const ExecutorCase& c = GetParam();
    std::string dir = c.dir;
    if (dir.empty()) {
      dir =
          (std::filesystem::temp_directory_path() /
           ("twice-cuda-executor-" + c.name + "-" + std::to_string(::getpid())))
              .string();
      InitModelOptions init;
      init.architecture = c.architecture;
      init.preset = c.preset;
      init.out_dir = dir;
      init.seed = kernels::cuda::testing::TestSeed();
      ASSERT_OK(WriteRandomModel(init));
      cleanup_ = dir;
    }
    ASSERT_OK_AND_ASSIGN(model_, LoadModel(dir));
    stacked_ = dynamic_cast<const StackedModel*>(model_.get());
    ASSERT_NE(stacked_, nullptr);
    ResidentExecutorOptions options;
    options.slots = 64;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExecutorDevice> gpu,
                         NewCudaExecutorDevice(0));
    ASSERT_OK_AND_ASSIGN(
        gpu_, ResidentExecutor::Create(*stacked_, std::move(gpu), options));
    ASSERT_OK_AND_ASSIGN(cpu_, ResidentExecutor::Create(
                                   *stacked_, NewCpuExecutorDevice(), options));
    ASSERT_EQ(gpu_->device().name().rfind("cuda:0", 0), 0u)
        << gpu_->device().name();
    EXPECT_GT(gpu_->device().traffic().weight_bytes, 0);
  }
  void TearDown() override {
    gpu_.reset();
    cpu_.reset();
    if (!cleanup_.empty()) std::filesystem::remove_all(cleanup_);
  }

  std::vector<int32_t> Tokens(int64_t n, uint32_t salt) const {
    return kernels::cuda::testing::RandomTokenIds(
        n, model_->description().vocab_size, salt);
  }

  int32_t Argmax(const std::vector<float>& logits) const {
    const kernels::SamplingRule greedy;
    int32_t id = -1;
    EXPECT_OK(kernels::SampleRows(
        logits, 1, logits.size(), model_->description().vocab_size,
        absl::MakeConstSpan(&greedy, 1), absl::MakeSpan(&id, 1)));
    return id;
  }

  // KL(softmax(p) || softmax(q)) over the model's vocabulary (padding
  // columns excluded), in double.
  double Kl(const std::vector<float>& p, const std::vector<float>& q) const {
    const size_t v = static_cast<size_t>(model_->description().vocab_size);
    auto log_softmax = [v](const std::vector<float>& x) {
      double m = -1e300;
      for (size_t i = 0; i < v; ++i) m = std::max(m, double{x[i]});
      double z = 0.0;
      for (size_t i = 0; i < v; ++i) z += std::exp(double{x[i]} - m);
      std::vector<double> out(v);
      for (size_t i = 0; i < v; ++i) out[i] = double{x[i]} - m - std::log(z);
      return out;
    };
    const std::vector<double> lp = log_softmax(p), lq = log_softmax(q);
    double kl = 0.0;
    for (size_t i = 0; i < v; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    return kl;
  }

  std::unique_ptr<Model> model_;
  const StackedModel* stacked_ = nullptr;
  std::unique_ptr<ResidentExecutor> gpu_;
  std::unique_ptr<ResidentExecutor> cpu_;
  std::string cleanup_;
};

TEST_P(ResidentExecutorCudaTest, PrefillAndBatchedStepsMatchTheCpu) {
  // Long enough for the chunked SSD scan (>= 64 tokens) over several
  // prefill passes.
  const std::vector<int32_t> prompt = Tokens(1300, 1);
  ASSERT_OK_AND_ASSIGN(SlotId g, gpu_->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId c, cpu_->NewSequence());
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, gpu_->Prefill(g, prompt));
  ASSERT_OK_AND_ASSIGN(std::vector<float> want, cpu_->Prefill(c, prompt));
  EXPECT_LE(RelativeError(got, want), kExecutorTolerance);
  int top1 = Argmax(got) == Argmax(want) ? 1 : 0;
  double kl = Kl(want, got);
  // Eight more sequences, then batched steps.
  std::vector<SlotId> gs = {g}, cs = {c};
  for (int b = 1; b < 9; ++b) {
    const std::vector<int32_t> p = Tokens(5 + 11 * b, 10 + b);
    ASSERT_OK_AND_ASSIGN(SlotId gb, gpu_->NewSequence());
    ASSERT_OK_AND_ASSIGN(SlotId cb, cpu_->NewSequence());
    ASSERT_OK(gpu_->Prefill(gb, p));
    ASSERT_OK(cpu_->Prefill(cb, p));
    gs.push_back(gb);
    cs.push_back(cb);
  }
  int rows = 1;
  for (int step = 0; step < 4; ++step) {
    const std::vector<int32_t> tokens = Tokens(9, 100 + step);
    ASSERT_OK_AND_ASSIGN(got, gpu_->StepLogits(tokens, gs));
    ASSERT_OK_AND_ASSIGN(want, cpu_->StepLogits(tokens, cs));
    EXPECT_LE(RelativeError(got, want), kExecutorTolerance) << step;
    const size_t v = got.size() / 9;
    for (size_t b = 0; b < 9; ++b) {
      const std::vector<float> gr(got.begin() + b * v,
                                  got.begin() + (b + 1) * v);
      const std::vector<float> cr(want.begin() + b * v,
                                  want.begin() + (b + 1) * v);
      top1 += Argmax(gr) == Argmax(cr) ? 1 : 0;
      kl += Kl(cr, gr);
      ++rows;
    }
  }
  std::printf(
      "%s: GPU vs CPU top-1 agreement %d / %d rows, mean KL(cpu || gpu) "
      "%.3g nats\n",
      GetParam().name.c_str(), top1, rows, kl / rows);
  // Trained weights rarely have near-ties; bf16 may still flip one.
  if (GetParam().trained) {
    EXPECT_GE(top1 * 10, rows * 9);
    EXPECT_LE(kl / rows, 5e-2);
  }
}

// JRT-RNN's prefix reads (the encoder pass in the fused bf16 kernel at the
// published shape, the featurized kernels otherwise) against the CPU, in
// every mode, shorter and longer than the encoder, then a few steps.
TEST_P(ResidentExecutorCudaTest, PrefixReadsMatchTheCpu) {
  if (model_->description().prefix_length == 0) {
    GTEST_SKIP() << "no prefix encoder";
  }
  const int64_t m = model_->description().prefix_length;
  for (const PrefillMode mode :
       {PrefillMode::kPrefix, PrefillMode::kPrefixReadTwice,
        PrefillMode::kPrefixUnpadded}) {
    for (const int64_t n : {m / 3, m + 100}) {
      SCOPED_TRACE(::testing::Message() << static_cast<int>(mode) << " " << n);
      ASSERT_OK_AND_ASSIGN(
          StackedModel::PrefixRead read,
          stacked_->MakePrefixRead(Tokens(n, 40 + static_cast<uint32_t>(n)),
                                   mode, 0));
      ASSERT_OK_AND_ASSIGN(SlotId g, gpu_->NewSequence());
      ASSERT_OK_AND_ASSIGN(SlotId c, cpu_->NewSequence());
      ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                           gpu_->Prefill(g, read.input, &read.encoding));
      ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                           cpu_->Prefill(c, read.input, &read.encoding));
      EXPECT_LE(RelativeError(got, want), kExecutorTolerance);
      const SlotId gs[] = {g}, cs[] = {c};
      for (int step = 0; step < 3; ++step) {
        const std::vector<int32_t> token = Tokens(1, 300 + step);
        ASSERT_OK_AND_ASSIGN(got, gpu_->StepLogits(token, gs));
        ASSERT_OK_AND_ASSIGN(want, cpu_->StepLogits(token, cs));
        EXPECT_LE(RelativeError(got, want), kExecutorTolerance) << step;
      }
      ASSERT_OK(gpu_->Release(g));
      ASSERT_OK(cpu_->Release(c));
    }
  }
}

TEST_P(ResidentExecutorCudaTest, StatesCrossBetweenGpuAndCpuThroughTheCodec) {
  const std::vector<int32_t> prompt = Tokens(300, 2);
  ASSERT_OK_AND_ASSIGN(SlotId g, gpu_->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId c, cpu_->NewSequence());
  ASSERT_OK(gpu_->Prefill(g, prompt));
  ASSERT_OK(cpu_->Prefill(c, prompt));
  // Stored as the store keeps it, and resumed on the other device.
  auto through_codec = [&](ResidentExecutor& from, SlotId slot,
                           ResidentExecutor& to) -> absl::StatusOr<SlotId> {
    absl::StatusOr<std::unique_ptr<SequenceState>> saved = from.Save(slot);
    if (!saved.ok()) return saved.status();
    std::unique_ptr<SequenceState> decoded = model_->NewState();
    absl::Status s = DecodeStateInto(EncodeState(**saved), *decoded);
    if (!s.ok()) return s;
    return to.Resume(*decoded);
  };
  ASSERT_OK_AND_ASSIGN(SlotId gpu_on_cpu, through_codec(*gpu_, g, *cpu_));
  ASSERT_OK_AND_ASSIGN(SlotId cpu_on_gpu, through_codec(*cpu_, c, *gpu_));
  ASSERT_OK_AND_ASSIGN(int64_t count, gpu_->TokenCount(cpu_on_gpu));
  EXPECT_EQ(count, 300);
  // The same tokens into the CPU's own state (row 0), the GPU's state
  // continued on the CPU (row 1) and the CPU's continued on the GPU.
  const std::vector<int32_t> more = Tokens(6, 3);
  const std::vector<SlotId> on_cpu = {c, gpu_on_cpu};
  const SlotId on_gpu[] = {cpu_on_gpu};
  for (int32_t t : more) {
    ASSERT_OK_AND_ASSIGN(std::vector<float> cpu_rows,
                         cpu_->StepLogits(std::vector<int32_t>{t, t}, on_cpu));
    ASSERT_OK_AND_ASSIGN(std::vector<float> gpu_row,
                         gpu_->StepLogits(std::vector<int32_t>{t}, on_gpu));
    const size_t v = gpu_row.size();
    const std::vector<float> want(cpu_rows.begin(), cpu_rows.begin() + v);
    const std::vector<float> gpu_then_cpu(cpu_rows.begin() + v, cpu_rows.end());
    EXPECT_LE(RelativeError(gpu_then_cpu, want), kExecutorTolerance);
    EXPECT_LE(RelativeError(gpu_row, want), kExecutorTolerance);
  }
}

TEST_P(ResidentExecutorCudaTest, SixtyFourSequencesGetTheTokensEachGetsAlone) {
  if (!GetParam().trained) GTEST_SKIP() << "greedy ties need trained weights";
  constexpr int kSequences = 64;
  constexpr int kSteps = 8;
  std::vector<SlotId> slots;
  std::vector<kernels::SamplingRule> rules(kSequences);
  std::vector<int32_t> next;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kSequences; ++i) {
    prompts.push_back(Tokens(3 + i % 13, 200 + i));
    if (i % 2 == 1) {
      rules[i].temperature = 0.8f;
      rules[i].top_k = 40;
      rules[i].top_p = 0.95f;
      rules[i].seed = 7000 + i;
    }
    ASSERT_OK_AND_ASSIGN(SlotId s, gpu_->NewSequence());
    ASSERT_OK(gpu_->Prefill(s, prompts[i]));
    slots.push_back(s);
    next.push_back(prompts[i].back());
  }
  std::vector<std::vector<int32_t>> batched(kSequences);
  const DeviceTraffic before = gpu_->device().traffic();
  for (int step = 0; step < kSteps; ++step) {
    for (auto& r : rules) r.draw = static_cast<uint64_t>(step);
    ASSERT_OK_AND_ASSIGN(next, gpu_->Step(next, slots, rules));
    for (int i = 0; i < kSequences; ++i) batched[i].push_back(next[i]);
  }
  // Only the ids came back.
  EXPECT_EQ(gpu_->device().traffic().bytes_to_host - before.bytes_to_host,
            int64_t{kSteps} * kSequences * 4);
  for (const SlotId& s : slots) ASSERT_OK(gpu_->Release(s));
  for (int i = 0; i < kSequences; ++i) {
    SCOPED_TRACE(i);
    ASSERT_OK_AND_ASSIGN(SlotId s, gpu_->NewSequence());
    ASSERT_OK(gpu_->Prefill(s, prompts[i]));
    std::vector<int32_t> alone;
    int32_t token = prompts[i].back();
    kernels::SamplingRule rule = rules[i];
    const SlotId one[] = {s};
    for (int step = 0; step < kSteps; ++step) {
      rule.draw = static_cast<uint64_t>(step);
      ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids,
                           gpu_->Step(std::vector<int32_t>{token}, one,
                                      absl::MakeConstSpan(&rule, 1)));
      token = ids[0];
      alone.push_back(token);
    }
    EXPECT_EQ(alone, batched[i]);
    ASSERT_OK(gpu_->Release(s));
  }
}

// Decode steps recorded as graphs (the default) against the same steps run
// as they are, on the GPU: the same ids, bit for bit, through batch sizes
// that change (each size's first step runs, its second is recorded, later
// ones replay) and a long prefill in between that grows the device's
// scratch (graphs recorded before are recorded again). Models whose layers
// page their states or route on the host run every step as it is, and say
// why.
TEST_P(ResidentExecutorCudaTest, RecordedStepsEqualStepsRunAsTheyAre) {
  ResidentExecutorOptions options;
  options.slots = 64;
  options.step_graphs = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExecutorDevice> device,
                       NewCudaExecutorDevice(0));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<ResidentExecutor> plain,
      ResidentExecutor::Create(*stacked_, std::move(device), options));
  // Every case but the paged ones and the mixture of experts.
  const bool records =
      !gpu_->has_paged_kv() && GetParam().name != "granite_tiny_moe";
  std::vector<std::vector<int32_t>> got[2];
  ResidentExecutor* executors[] = {gpu_.get(), plain.get()};
  const int batches[] = {1, 3, 3, 3, 3, 1, 1, 1, 3, 3};
  for (int e = 0; e < 2; ++e) {
    ResidentExecutor& x = *executors[e];
    std::vector<SlotId> slots;
    std::vector<int32_t> next;
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(SlotId s, x.NewSequence());
      ASSERT_OK(x.Prefill(s, Tokens(5 + i, 300 + i)));
      slots.push_back(s);
      next.push_back(Tokens(1, 400 + i)[0]);
    }
    std::vector<kernels::SamplingRule> rules(3);
    rules[1].temperature = 0.9f;
    rules[1].top_p = 0.9f;
    rules[1].seed = 11;
    rules[2].temperature = 1.2f;
    rules[2].top_k = 20;
    rules[2].seed = 12;
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
  EXPECT_EQ(plain->device().traffic().graph_launches, 0);
  if (records) {
    EXPECT_OK(gpu_->step_graphs_status());
    EXPECT_GE(gpu_->device().traffic().graph_launches, 4);
    EXPECT_GE(gpu_->step_graphs(), 1);
  } else {
    EXPECT_EQ(gpu_->step_graphs_status().code(),
              absl::StatusCode::kFailedPrecondition)
        << gpu_->step_graphs_status();
    EXPECT_EQ(gpu_->device().traffic().graph_launches, 0);
  }
}

// The published Based shape (F = 16, hd = 64: the fused bf16 linear
// attention) runs as JRT-RNN's 360M shape, which has every Based layer
// plus the prefix encoder; one random 360M model per test keeps the device
// check within its time.
INSTANTIATE_TEST_SUITE_P(
    Models, ResidentExecutorCudaTest,
    ::testing::Values(
        ExecutorCase{"tiny", "", "mamba2", "tiny", false},
        ExecutorCase{"shape130m", "", "mamba2", "mamba2-130m-shape", false},
        ExecutorCase{"qa", "models/mamba2-qa", "", "", true},
        ExecutorCase{"based_tiny", "", "based", "tiny", false},
        ExecutorCase{"based_qa", "models/based-qa", "", "", true},
        ExecutorCase{"jrt_tiny", "", "jrt", "tiny", false},
        ExecutorCase{"jrt_360m_shape", "", "jrt", "360m-shape", false},
        ExecutorCase{"jrt_qa", "models/jrt-qa", "", "", true},
        // Llama: attention over the paged KV cache (GQA 15/5 at 360M).
        ExecutorCase{"llama_tiny", "", "llama", "tiny", false},
        ExecutorCase{"llama_360m_shape", "", "llama", "llama-360m-shape",
                     false},
        ExecutorCase{"llama_qa", "models/llama-qa", "", "", true},
        // Nemotron-H (Mamba-2, attention without rotary, squared-ReLU
        // MLP layers) and RAT (chunk attention over paged closed chunks,
        // and its window layers).
        ExecutorCase{"nemotron_h_tiny", "", "nemotron_h", "tiny", false},
        ExecutorCase{"nemotron_h_qa", "models/nemotron-h-qa", "", "", true},
        ExecutorCase{"rat_tiny", "", "rat", "tiny", false},
        ExecutorCase{"rat_swa_tiny", "", "rat", "tiny-swa", false},
        ExecutorCase{"rat_xl_shape", "", "rat", "rat-xl-shape", false},
        // Granite-4.0-H: scaled embedding, residuals and logits (tiny,
        // dense) and its mixture of experts (4 experts, top 2: a router
        // GEMM of padded rows). The published MoE width (64 experts of
        // 6 layers, ~0.9 B parameters) is left to the engine bench: the
        // CPU reference of every test would not fit the check's minutes.
        ExecutorCase{"granite_tiny", "", "granitemoehybrid", "tiny", false},
        ExecutorCase{"granite_tiny_moe", "", "granitemoehybrid", "tiny-moe",
                     false}),
    [](const ::testing::TestParamInfo<ExecutorCase>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace twice::engine
