// The fixture of the resident executor's GPU tests
// (resident_executor_cuda_test.cc, step_graphs_cuda_test.cc): a model
// (a shipped one, or random weights of a preset written for the test),
// loaded once as a ResidentExecutor on the CUDA device and once on the CPU
// device, with the same options; SKIPPED without a GPU. Helpers: random
// token ids of the run's seed, the greedy id of a logits row, and the KL
// divergence of two rows' softmaxes.
#ifndef TWICE_TESTS_CUDA_ENGINE_RESIDENT_CUDA_FIXTURE_H_
#define TWICE_TESTS_CUDA_ENGINE_RESIDENT_CUDA_FIXTURE_H_

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/executor/resident_executor.h"
#include "engine/models/init_model.h"
#include "engine/models/stacked_model.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_info.h"
#include "kernels/sampling.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda_engine/random_test_model.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {

inline constexpr double kExecutorTolerance = 3e-2;

struct ExecutorCase {
  std::string name;
  std::string dir;           // a shipped model, or empty for random weights
  std::string architecture;  // and preset of the random weights
  std::string preset;
  bool trained = false;
};

inline void PrintTo(const ExecutorCase& c, std::ostream* os) { *os << c.name; }

class ResidentExecutorCudaTest : public ::testing::TestWithParam<ExecutorCase> {
 protected:
  void SetUp() override {
    if (kernels::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    const ExecutorCase& c = GetParam();
    std::string dir = c.dir;
    if (dir.empty()) {
      ASSERT_OK_AND_ASSIGN(dir,
                           WriteRandomTestModel("twice-cuda-executor-" + c.name,
                                                c.architecture, c.preset));
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

}  // namespace twice::engine

#endif  // TWICE_TESTS_CUDA_ENGINE_RESIDENT_CUDA_FIXTURE_H_
