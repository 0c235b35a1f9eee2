// How far bf16, f16 and int8 loads of the golden models (tests/data/golden)
// and of the shipped models (models/) move the logits away from the f32
// load, on a fixed random prompt: the numbers models/README.md states.
// Bounds, on max |logit difference| / max |f32 logit| over a 48-token
// prefill and 5 steps: rounding a weight to bf16 perturbs it by up to 2^-9
// relative, f16 by 2^-12, int8 by half a step of its block's scale; the
// bounds (bf16 2 %, f16 0.4 %, int8 10 %) hold every model and fail on a
// broken kernel, which moves logits by their whole size. int8 is the
// loosest because the Nemotron-H golden model measures 6.8 %: its rows are
// 16 wide (a block of 64 is the whole row), its logits small (|logit| ~1),
// and the squared ReLU doubles the relative error of the up projection.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/models/model.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

struct LogitError {
  double max_error = 1e9;  // max |logit_lowp - logit_f32|
  double scale = 0;        // max |logit_f32|
};

LogitError MaxLogitError(const std::string& dir, DType dtype) {
  LoadOptions f32_options;
  f32_options.weights_dtype = DType::kF32;
  LoadOptions lowp_options;
  lowp_options.weights_dtype = dtype;
  auto f32 = LoadModel(dir, f32_options);
  auto lowp = LoadModel(dir, lowp_options);
  EXPECT_OK(f32);
  EXPECT_OK(lowp);
  if (!f32.ok() || !lowp.ok()) return {};
  const int vocab = (*f32)->description().vocab_size;
  const std::vector<int32_t> prompt = testing::RandomTokens(48, vocab, 17);
  auto a = (*f32)->NewState();
  auto b = (*lowp)->NewState();
  auto la = (*f32)->Prefill(prompt, *a, PrefillMode::kCausal);
  auto lb = (*lowp)->Prefill(prompt, *b, PrefillMode::kCausal);
  EXPECT_OK(la);
  EXPECT_OK(lb);
  LogitError e{0, 0};
  for (int step = 0; la.ok() && lb.ok(); ++step) {
    for (int i = 0; i < vocab; ++i) {
      e.max_error =
          std::max(e.max_error, std::abs(double{(*la)[i]} - (*lb)[i]));
      e.scale = std::max(e.scale, std::abs(double{(*la)[i]}));
    }
    if (step == 4) break;
    la = (*f32)->Step(5 + step, *a);
    lb = (*lowp)->Step(5 + step, *b);
  }
  return e;
}

std::vector<std::string> ModelDirs() {
  std::vector<std::string> dirs;
  for (const char* root : {"tests/data/golden", "models"}) {
    for (const auto& e : std::filesystem::directory_iterator(root)) {
      if (std::filesystem::exists(e.path() / "config.json")) {
        dirs.push_back(e.path().string());
      }
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(WeightsDTypeErrorTest, LogitErrorOfEveryGoldenAndShippedModel) {
  struct Bound {
    DType dtype;
    double max_error;
  };
  const std::vector<std::string> dirs = ModelDirs();
  ASSERT_GE(dirs.size(), 10u);
  std::printf("%-26s %8s | %16s %16s %16s\n", "model", "|logit|", "bf16", "f16",
              "int8");
  for (const std::string& dir : dirs) {
    double scale = 0;
    std::string row;
    for (Bound b : {Bound{DType::kBF16, 0.02}, Bound{DType::kF16, 0.004},
                    Bound{DType::kI8, 0.10}}) {
      const LogitError e = MaxLogitError(dir, b.dtype);
      scale = e.scale;
      const double relative = e.max_error / std::max(e.scale, 1e-6);
      row += absl::StrFormat(" %8.2e (%4.2f%%)", e.max_error, 100 * relative);
      EXPECT_LT(relative, b.max_error) << dir << " " << DTypeName(b.dtype);
    }
    std::printf("%-26s %8.2f |%s\n", dir.c_str(), scale, row.c_str());
  }
}

}  // namespace
}  // namespace twice::engine
