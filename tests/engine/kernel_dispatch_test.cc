// The kernels/ dispatch point as every architecture uses it, on the CPU: a
// backend that records each call and declines it (UNIMPLEMENTED) must see
// the ops the architecture runs — so a device backend receives them — and
// the results must be bit-identical to running with no backend (a declined
// call runs the CPU code unchanged). An error other than UNIMPLEMENTED is
// the call's error, and it leaves the state the read was changing marked
// damaged (engine/models/state_checks.h).
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

// Declines everything; records which ops were offered. A test's own
// instrument of the dispatch point, not a stand-in for a device.
class RecordingBackend final : public kernels::KernelBackend {
 public:
  explicit RecordingBackend(absl::Status answer = absl::UnimplementedError(
                                "recording backend declines"))
      : answer_(std::move(answer)) {}
  std::string name() const override { return "recording"; }
  kernels::KernelBackendStats stats() const override { return {}; }
  std::set<std::string> ops() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_;
  }

  absl::Status Linear(absl::Span<const float>, int64_t, int64_t,
                      const kernels::Tensor&, int64_t, absl::Span<const float>,
                      absl::Span<float>) override {
    return Offered("Linear");
  }
  absl::Status RmsNorm(absl::Span<const float>, int64_t, int64_t,
                       absl::Span<const float>, float,
                       absl::Span<float>) override {
    return Offered("RmsNorm");
  }
  absl::Status RopeRotateHalf(absl::Span<float>, int64_t, int64_t, int64_t,
                              int64_t, int64_t, float) override {
    return Offered("RopeRotateHalf");
  }
  absl::Status SiluMul(absl::Span<const float>, int64_t,
                       absl::Span<const float>, int64_t, int64_t, int64_t,
                       absl::Span<float>) override {
    return Offered("SiluMul");
  }
  absl::Status SwiGlu(absl::Span<const float>, int64_t, int64_t,
                      absl::Span<float>) override {
    return Offered("SwiGlu");
  }
  absl::Status TaylorFeatureMap(absl::Span<const float>, int64_t, int64_t,
                                absl::Span<float>) override {
    return Offered("TaylorFeatureMap");
  }
  absl::Status CausalConv1d(absl::Span<const float>, int64_t, int64_t, int64_t,
                            absl::Span<const float>, int64_t, absl::Span<float>,
                            absl::Span<float>) override {
    return Offered("CausalConv1d");
  }
  absl::Status PrefixLinearAttentionPrefill(
      absl::Span<const float>, absl::Span<const float>, absl::Span<const float>,
      int64_t, absl::Span<const float>, absl::Span<const float>, int64_t,
      const kernels::LinearAttentionDims&, float, absl::Span<float>,
      absl::Span<float>, absl::Span<float>) override {
    return Offered("LinearAttention");
  }
  absl::Status TaylorLinearAttention(
      absl::Span<const float>, absl::Span<const float>, absl::Span<const float>,
      int64_t, absl::Span<const float>, absl::Span<const float>, int64_t,
      const kernels::TaylorAttentionDims&, float, absl::Span<float>,
      absl::Span<float>, absl::Span<float>) override {
    return Offered("TaylorLinearAttention");
  }
  absl::Status WindowAttention(absl::Span<const float>, int64_t,
                               absl::Span<const float>, absl::Span<const float>,
                               const kernels::WindowAttentionDims&, float,
                               absl::Span<float>) override {
    return Offered("WindowAttention");
  }
  absl::Status CausalGqaAttention(absl::Span<const float>, int64_t,
                                  absl::Span<const float>,
                                  absl::Span<const float>,
                                  const kernels::CausalAttentionDims&, float,
                                  absl::Span<float>) override {
    return Offered("CausalGqaAttention");
  }
  absl::Status RatChunkAttention(kernels::StridedRows, kernels::StridedRows,
                                 kernels::StridedRows, kernels::StridedRows,
                                 kernels::StridedRows,
                                 absl::Span<const int64_t>,
                                 const kernels::RatAttentionDims&, float,
                                 absl::Span<float>) override {
    return Offered("RatChunkAttention");
  }
  absl::Status SsdChunkScan(const kernels::SsdShape&, int64_t, int64_t,
                            absl::Span<const float>, int64_t,
                            absl::Span<const float>, absl::Span<const float>,
                            int64_t, absl::Span<const float>,
                            absl::Span<const float>, absl::Span<const float>,
                            absl::Span<float>, absl::Span<float>) override {
    return Offered("SsdChunkScan");
  }
  absl::Status SampleRows(absl::Span<const float>, int64_t, int64_t, int64_t,
                          absl::Span<const kernels::SamplingRule>,
                          absl::Span<int32_t>) override {
    return Offered("SampleRows");
  }

 private:
  absl::Status Offered(const char* op) {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.insert(op);
    return answer_;
  }

  const absl::Status answer_;
  mutable std::mutex mu_;
  std::set<std::string> ops_;
};

struct Case {
  std::string architecture;
  std::string preset;
  std::set<std::string> ops;  // at least these are offered
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.architecture << "/" << c.preset;
}

class KernelDispatchTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    InitModelOptions init;
    init.architecture = GetParam().architecture;
    init.preset = GetParam().preset;
    init.out_dir = dir_.Sub("model");
    init.seed = 3;
    ASSERT_OK(WriteRandomModel(init));
    absl::StatusOr<std::unique_ptr<Model>> model = LoadModel(init.out_dir);
    ASSERT_OK(model);
    model_ = *std::move(model);
  }
  void TearDown() override { kernels::SetKernelBackend(nullptr); }

  // Prefill (causal, and prefix where the model has an encoder) and a
  // step; every logits row.
  std::vector<float> Run() {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 70; ++i) tokens.push_back((i * 37 + 11) % 200);
    std::vector<float> all;
    std::vector<PrefillMode> modes = {PrefillMode::kCausal};
    if (model_->description().prefix_length > 0) {
      modes.push_back(PrefillMode::kPrefix);
    }
    for (PrefillMode mode : modes) {
      std::unique_ptr<SequenceState> state = model_->NewState();
      absl::StatusOr<std::vector<float>> logits =
          model_->Prefill(tokens, *state, mode);
      EXPECT_OK(logits);
      if (!logits.ok()) return all;
      all.insert(all.end(), logits->begin(), logits->end());
      absl::StatusOr<std::vector<float>> step = model_->Step(5, *state);
      EXPECT_OK(step);
      if (!step.ok()) return all;
      all.insert(all.end(), step->begin(), step->end());
    }
    return all;
  }

  testing::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_P(KernelDispatchTest, EveryOpIsOfferedAndDeclinedCallsRunOnCpu) {
  const std::vector<float> cpu = Run();
  auto recorder = std::make_shared<RecordingBackend>();
  kernels::SetKernelBackend(recorder);
  const std::vector<float> declined = Run();
  kernels::SetKernelBackend(nullptr);
  EXPECT_EQ(declined, cpu);
  const std::set<std::string> offered = recorder->ops();
  for (const std::string& op : GetParam().ops) {
    EXPECT_TRUE(offered.count(op)) << op << " never reached the backend";
  }
}

TEST_P(KernelDispatchTest, BackendErrorsAreTheCallsErrors) {
  kernels::SetKernelBackend(std::make_shared<RecordingBackend>(
      absl::ResourceExhaustedError("device out of memory")));
  std::unique_ptr<SequenceState> state = model_->NewState();
  absl::StatusOr<std::vector<float>> logits = model_->Prefill(
      std::vector<int32_t>{1, 2, 3}, *state, PrefillMode::kCausal);
  EXPECT_EQ(logits.status().code(), absl::StatusCode::kResourceExhausted);
  // The read had begun (its inputs were valid), so the state it was
  // changing in place is marked damaged and refused from then on.
  EXPECT_EQ(state->token_count(), 0);
  EXPECT_TRUE(state->damaged());
  kernels::SetKernelBackend(nullptr);
  absl::StatusOr<std::vector<float>> again = model_->Step(4, *state);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("failed read"), std::string::npos)
      << again.status();
  // A fresh state reads normally.
  std::unique_ptr<SequenceState> fresh = model_->NewState();
  EXPECT_TRUE(
      model_
          ->Prefill(std::vector<int32_t>{1, 2, 3}, *fresh, PrefillMode::kCausal)
          .ok());
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, KernelDispatchTest,
    ::testing::Values(
        Case{"based",
             "tiny",
             {"Linear", "RmsNorm", "CausalConv1d", "TaylorLinearAttention",
              "TaylorFeatureMap", "LinearAttention", "WindowAttention"}},
        Case{"jrt",
             "tiny",
             {"Linear", "RmsNorm", "TaylorLinearAttention", "TaylorFeatureMap",
              "LinearAttention"}},
        Case{"mamba2", "tiny", {"Linear", "CausalConv1d", "SsdChunkScan"}},
        Case{"llama",
             "tiny",
             {"Linear", "RmsNorm", "RopeRotateHalf", "CausalGqaAttention"}},
        Case{"rat", "tiny", {"Linear", "RmsNorm", "RatChunkAttention"}},
        Case{"rat", "tiny-swa", {"Linear", "WindowAttention"}},
        Case{"nemotron_h",
             "tiny",
             {"Linear", "RmsNorm", "CausalConv1d", "SsdChunkScan",
              "CausalGqaAttention"}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.architecture + "_" + info.param.preset;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace twice::engine
