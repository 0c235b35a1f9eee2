// Models loaded with low-precision weights (--weights_dtype), for every
// architecture, against the same model whose checkpoint holds the very
// rounded (or quantized) values in f32 and runs the f32 kernels (the path
// the golden tests check against float64 references). So the tolerance
// measures the f16 / int8 kernels, not the rounding: 1e-4 absolute + 1e-4
// relative on the logits (f32 accumulation in another order; an int8
// product's int16 input, kernels/cpu/int8_dot.h, is within 2^-15 of each
// block's largest value, well inside that). A bf16 load
// also rounds every matrix input to bf16 (kernels/cpu/lowp_dot.h), 2^-9
// relative per element, carried through the layers: 5e-3 + 5e-3 relative
// (measured: up to 1.6e-3 on logits of order 0.1-0.3); a wrong row or a
// lost tail is off by the logits' own size.
// Also per dtype: the design's invariants (prefill + step = prefill,
// prefill + prefill = prefill), the fingerprint rule (a load that converts
// is another model; a load as stored is the same), and bf16 checkpoints
// kept as stored.
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/weights/safetensors.h"
#include "gtest/gtest.h"
#include "kernels/tensor_convert.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::RandomTokens;
using testing::TempDir;

constexpr int kVocab = 300;
constexpr double kAtol = 1e-4, kRtol = 1e-4;
constexpr double kBf16InputAtol = 5e-3, kBf16InputRtol = 5e-3;

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what, double atol = kAtol,
                 double rtol = kRtol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i]))
        << what << " at " << i;
  }
}

std::unique_ptr<Model> Load(const std::string& dir,
                            std::optional<DType> dtype) {
  LoadOptions options;
  options.weights_dtype = dtype;
  absl::StatusOr<std::unique_ptr<Model>> m = LoadModel(dir, options);
  EXPECT_OK(m);
  return m.ok() ? *std::move(m) : nullptr;
}

// Copies the model in `from` to `to` with every matrix (rank 2: the
// projections and embeddings GetMatrix loads) rounded through `dtype` and
// stored back as f32.
void WriteRoundedCopy(const std::string& from, const std::string& to,
                      DType dtype) {
  std::filesystem::create_directories(to);
  for (const char* f : {"config.json", "tokenizer.json"}) {
    std::filesystem::copy_file(
        from + "/" + f, to + "/" + f,
        std::filesystem::copy_options::overwrite_existing);
  }
  auto weights = testing::ReadAllWeights(from + "/model.safetensors");
  ASSERT_OK(weights);
  for (auto& [name, t] : *weights) {
    if (t.rank() != 2) continue;
    auto narrow = kernels::ConvertTensor(t, dtype);
    ASSERT_OK(narrow);
    auto back = kernels::ConvertTensor(*narrow, DType::kF32);
    ASSERT_OK(back);
    std::vector<float> values(back->data(), back->data() + back->size());
    t = Tensor::FromVector(t.shape(), std::move(values));
  }
  ASSERT_TRUE(
      testing::WriteAllWeights(to + "/model.safetensors", *weights).ok());
}

class WeightsDTypeTest
    : public ::testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const char* arch : {"based", "jrt", "mamba2", "rat", "llama"}) {
      const std::string out = dir_->Sub(arch);
      std::filesystem::create_directories(out);
      const std::string tok = out + ".tokenizer.json";
      testing::WriteFileOrFail(tok, testing::SmallTokenizerJson(kVocab));
      InitModelOptions options;
      options.architecture = arch;
      options.preset = "tiny";
      options.out_dir = out;
      options.tokenizer_json = tok;
      options.seed = 5;
      ASSERT_OK(WriteRandomModel(options));
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  std::string arch() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
  std::string dir() const { return dir_->Sub(arch()); }

  static TempDir* dir_;
};
TempDir* WeightsDTypeTest::dir_ = nullptr;

TEST_P(WeightsDTypeTest, MatchesF32KernelsOnTheRoundedWeights) {
  TempDir rounded;
  WriteRoundedCopy(dir(), rounded.path(), dtype());
  auto lowp = Load(dir(), dtype());
  auto ref = Load(rounded.path(), DType::kF32);
  ASSERT_NE(lowp, nullptr);
  ASSERT_NE(ref, nullptr);
  // Long enough to cross Based's 64-token window and RAT's chunks.
  const std::vector<int32_t> prompt = RandomTokens(150, kVocab, 3);
  auto s1 = lowp->NewState();
  auto s2 = ref->NewState();
  auto a = lowp->Prefill(prompt, *s1, PrefillMode::kCausal);
  auto b = ref->Prefill(prompt, *s2, PrefillMode::kCausal);
  ASSERT_OK(a);
  ASSERT_OK(b);
  const bool bf16 = dtype() == DType::kBF16;
  const double atol = bf16 ? kBf16InputAtol : kAtol;
  const double rtol = bf16 ? kBf16InputRtol : kRtol;
  ExpectClose(*a, *b, "prefill", atol, rtol);
  for (int32_t token : {7, 42, 299}) {
    auto x = lowp->Step(token, *s1);
    auto y = ref->Step(token, *s2);
    ASSERT_OK(x);
    ASSERT_OK(y);
    ExpectClose(*x, *y, "step " + std::to_string(token), atol, rtol);
  }
}

TEST_P(WeightsDTypeTest, StatePassingIsExactInEveryDType) {
  auto model = Load(dir(), dtype());
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> all = RandomTokens(100, kVocab, 9);
  const std::vector<int32_t> head(all.begin(), all.begin() + 70);
  const std::vector<int32_t> tail(all.begin() + 70, all.end());
  auto whole = model->NewState();
  auto want = model->Prefill(all, *whole, PrefillMode::kCausal);
  auto split = model->NewState();
  ASSERT_OK(model->Prefill(head, *split, PrefillMode::kCausal));
  auto got = model->Prefill(tail, *split, PrefillMode::kCausal);
  ASSERT_OK(want);
  ASSERT_OK(got);
  ExpectClose(*got, *want, "prefill(a) + prefill(b)");
  // prefill(a) then step(b) == prefill(a + b)
  auto stepped = model->NewState();
  const std::vector<int32_t> almost(all.begin(), all.end() - 1);
  ASSERT_OK(model->Prefill(almost, *stepped, PrefillMode::kCausal));
  auto last = model->Step(all.back(), *stepped);
  ASSERT_OK(last);
  ExpectClose(*last, *want, "prefill(a) + step(b)");
}

TEST_P(WeightsDTypeTest, ConvertingLoadIsAnotherModel) {
  auto f32 = Load(dir(), std::nullopt);
  auto same = Load(dir(), DType::kF32);  // the checkpoint is f32
  auto lowp = Load(dir(), dtype());
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(same, nullptr);
  ASSERT_NE(lowp, nullptr);
  EXPECT_EQ(f32->description().fingerprint, same->description().fingerprint);
  EXPECT_NE(f32->description().fingerprint, lowp->description().fingerprint);
  auto state = f32->NewState();
  ASSERT_OK(f32->Prefill({1, 2, 3}, *state, PrefillMode::kCausal));
  EXPECT_EQ(lowp->Step(4, *state).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(
    AllArchitectures, WeightsDTypeTest,
    ::testing::Combine(
        ::testing::Values("based", "jrt", "mamba2", "rat", "llama"),
        ::testing::Values(DType::kBF16, DType::kF16, DType::kI8)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" +
             std::string(DTypeFlagName(std::get<1>(info.param)));
    });

// A bf16 checkpoint loads as stored: the matrices are views of the mapped
// file (no widened copy), and the load is the same model as an explicit
// --weights_dtype=bf16.
TEST(Bf16CheckpointTest, LoadsAsStoredAndMatchesExplicitBf16) {
  TempDir dir;
  const std::string tok = dir.Sub("tokenizer.json");
  testing::WriteFileOrFail(tok, testing::SmallTokenizerJson(kVocab));
  InitModelOptions options;
  options.architecture = "mamba2";
  options.preset = "tiny";
  options.out_dir = dir.Sub("m");
  options.tokenizer_json = tok;
  options.weights_dtype = DType::kBF16;
  ASSERT_OK(WriteRandomModel(options));
  auto file = SafetensorsFile::Open(dir.Sub("m") + "/model.safetensors");
  ASSERT_OK(file);
  for (const SafetensorsEntry& e : (*file)->entries()) {
    EXPECT_EQ(e.dtype_name, "BF16") << e.name;
  }
  auto as_stored = Load(dir.Sub("m"), std::nullopt);
  auto explicit_bf16 = Load(dir.Sub("m"), DType::kBF16);
  ASSERT_NE(as_stored, nullptr);
  ASSERT_NE(explicit_bf16, nullptr);
  EXPECT_EQ(as_stored->description().fingerprint,
            explicit_bf16->description().fingerprint);
  auto state = as_stored->NewState();
  EXPECT_OK(as_stored->Prefill({1, 2, 3}, *state, PrefillMode::kCausal));
  // int8 cannot be stored: it is made at load.
  options.weights_dtype = DType::kI8;
  EXPECT_EQ(WriteRandomModel(options).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WeightsDTypeFlagTest, ParsesEveryNameAndRejectsOthers) {
  EXPECT_EQ(*ParseWeightsDType("auto"), std::nullopt);
  EXPECT_EQ(*ParseWeightsDType("bf16"), DType::kBF16);
  EXPECT_EQ(*ParseWeightsDType("int8"), DType::kI8);
  EXPECT_EQ(WeightsDTypeName(DType::kF16), "f16");
  const auto bad = ParseWeightsDType("fp8");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("int8"), std::string::npos);
}

}  // namespace
}  // namespace twice::engine
