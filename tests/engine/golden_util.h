// Reading the golden data of tools/reference/make_golden.py: per model a
// directory tests/data/golden/<name>/ (config.json, model.safetensors,
// tokenizer.json), a manifest <name>_golden.json listing the cases (tokens,
// mode, continuation, greedy tokens, array names) and
// <name>_golden.safetensors holding the float64 reference's outputs rounded
// to float32: logits [V_pad] or [T, V_pad], and per-layer states
//   short_conv       tail [K-1, C]
//   linear_attention kv [H, hd, D], k_sum [H, D]
//   sliding_window   keys, values [n, H, hd] of positions count-n .. count-1
//
// Error measure used by every golden test:
//   RelativeError(got, want) = max_i |got_i - want_i| / max(max_i |want_i|,
//   1e-6), i.e. the worst absolute error relative to the reference's largest
//   magnitude (elementwise relative error is meaningless for entries near 0).
#ifndef TWICE_TESTS_ENGINE_GOLDEN_UTIL_H_
#define TWICE_TESTS_ENGINE_GOLDEN_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/layers/linear_attention_state.h"
#include "engine/layers/short_conv_state.h"
#include "engine/layers/window_kv_state.h"
#include "engine/runtime/generator.h"
#include "engine/state/sequence_state.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/safetensors.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine::testing {

inline constexpr char kGoldenDir[] = "tests/data/golden";

inline double RelativeError(absl::Span<const float> got,
                            absl::Span<const float> want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0.0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(double{got[i]} - double{want[i]}));
    scale = std::max(scale, std::abs(double{want[i]}));
  }
  return diff / scale;
}

// Largest error seen per kind of output, printed by the tests so the margins
// under the tolerances are visible in the log.
struct ErrorLog {
  double logits = 0.0;
  double states = 0.0;
  void Logits(double e) { logits = std::max(logits, e); }
  void States(double e) { states = std::max(states, e); }
  void Print(const char* what) const {
    std::printf("[golden] %s: max relative error logits %.3g, states %.3g\n",
                what, logits, states);
  }
};

class GoldenData {
 public:
  // Reads <kGoldenDir>/<name>_golden.json and .safetensors; a failure is
  // recorded and nullptr returned.
  static std::unique_ptr<GoldenData> Load(const std::string& name) {
    const std::string base = absl::StrCat(kGoldenDir, "/", name);
    auto g = std::unique_ptr<GoldenData>(new GoldenData());
    g->manifest_ = nlohmann::json::parse(ReadFileOrEmpty(base + "_golden.json"),
                                         nullptr, /*allow_exceptions=*/false);
    if (g->manifest_.is_discarded() || !g->manifest_.contains("cases")) {
      ADD_FAILURE() << "cannot read " << base << "_golden.json";
      return nullptr;
    }
    auto file = SafetensorsFile::Open(base + "_golden.safetensors");
    if (!file.ok()) {
      ADD_FAILURE() << file.status();
      return nullptr;
    }
    g->arrays_ = *std::move(file);
    g->model_dir_ = base;
    return g;
  }

  const std::string& model_dir() const { return model_dir_; }
  const nlohmann::json& manifest() const { return manifest_; }
  const nlohmann::json& cases() const { return manifest_.at("cases"); }

  // The case named `name`; a null json (and a failure) when absent.
  const nlohmann::json& Case(const std::string& name) const {
    for (const nlohmann::json& c : cases()) {
      if (c.at("name") == name) return c;
    }
    ADD_FAILURE() << "no golden case " << name;
    static const nlohmann::json kNull;
    return kNull;
  }

  // An array as owned f32; empty (and a failure) when absent.
  Tensor Array(const std::string& name) const {
    const SafetensorsEntry* e = arrays_->Find(name);
    if (e == nullptr) {
      ADD_FAILURE() << "no golden array " << name;
      return Tensor();
    }
    auto t = arrays_->ReadF32(*e);
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      return Tensor();
    }
    return Tensor::FromVector(
        t->shape(), std::vector<float>(t->data(), t->data() + t->size()));
  }

  // The array that entry `e` names under `key`, flattened.
  std::vector<float> Values(const nlohmann::json& e, const char* key) const {
    const Tensor t = Array(e.at(key).get<std::string>());
    return std::vector<float>(t.data(), t.data() + t.size());
  }

  // Row `row` of the [rows, V] array that `e` names under `key`.
  std::vector<float> Row(const nlohmann::json& e, const char* key,
                         int64_t row) const {
    const Tensor t = Array(e.at(key).get<std::string>());
    if (t.rank() != 2 || row >= t.shape()[0]) {
      ADD_FAILURE() << key << " has no row " << row;
      return {};
    }
    const int64_t n = t.shape()[1];
    return std::vector<float>(t.data() + row * n, t.data() + (row + 1) * n);
  }

  // Compares the layers of `state` that a case's "states" lists; returns the
  // largest RelativeError and records a failure on any layout mismatch.
  double StateError(SequenceState& state, const nlohmann::json& entries) const {
    double worst = 0.0;
    for (const nlohmann::json& e : entries) {
      const int layer = e.at("layer").get<int>();
      const std::string kind = e.at("kind").get<std::string>();
      if (layer < 0 || layer >= state.num_layers()) {
        ADD_FAILURE() << "state has no layer " << layer;
        return INFINITY;
      }
      LayerState& s = state.layer(layer);
      SCOPED_TRACE(absl::StrCat("layer ", layer, " (", kind, ")"));
      if (s.kind() != kind) {
        ADD_FAILURE() << "state kind " << s.kind();
        return INFINITY;
      }
      if (kind == "short_conv") {
        auto& conv = static_cast<ShortConvState&>(s);
        worst = std::max(worst, RelativeError(conv.tail(), Values(e, "tail")));
      } else if (kind == "linear_attention") {
        auto& la = static_cast<LinearAttentionState&>(s);
        worst = std::max(worst, RelativeError(la.kv(), Values(e, "kv")));
        worst = std::max(worst, RelativeError(la.k_sum(), Values(e, "k_sum")));
      } else if (kind == "sliding_window") {
        worst = std::max(worst, WindowError(static_cast<WindowKvState&>(s), e));
      }
    }
    return worst;
  }

 private:
  GoldenData() = default;

  // The ring holds position p in slot p mod capacity.
  double WindowError(WindowKvState& w, const nlohmann::json& e) const {
    EXPECT_EQ(w.count(), e.at("count").get<int64_t>());
    const Tensor keys = Array(e.at("keys").get<std::string>());
    const Tensor values = Array(e.at("values").get<std::string>());
    const int64_t n = keys.rank() == 3 ? keys.shape()[0] : 0;
    const int64_t row = w.heads() * w.head_dim();
    if (keys.size() != n * row || values.size() != n * row) {
      ADD_FAILURE() << "window shape " << ShapeToString(keys.shape());
      return INFINITY;
    }
    EXPECT_EQ(n, std::min(w.count(), w.capacity()));
    std::vector<float> got_k, got_v;
    for (int64_t p = w.count() - n; p < w.count(); ++p) {
      const int64_t slot = p % w.capacity();
      got_k.insert(got_k.end(), w.key(slot), w.key(slot) + row);
      got_v.insert(got_v.end(), w.value(slot), w.value(slot) + row);
    }
    return std::max(RelativeError(got_k, keys.span()),
                    RelativeError(got_v, values.span()));
  }

  nlohmann::json manifest_;
  std::unique_ptr<SafetensorsFile> arrays_;
  std::string model_dir_;
};

inline std::vector<int32_t> Tokens(const nlohmann::json& list) {
  return list.get<std::vector<int32_t>>();
}

// Every case's greedy continuation of its tokens by `model` is the
// reference's.
inline void ExpectGreedyContinuationsOf(const Model& model,
                                        const GoldenData& golden) {
  for (const auto& c : golden.cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<int32_t> want = Tokens(c.at("greedy"));
    GenerateOptions options;  // greedy by default
    options.max_tokens = static_cast<int32_t>(want.size());
    options.stop_at_eos = false;
    std::vector<int32_t> got;
    auto state = model.NewState();
    auto result = Generate(model, *state, Tokens(c.at("tokens")), options,
                           [&got](const GeneratedPiece& piece) {
                             got.insert(got.end(), piece.tokens.begin(),
                                        piece.tokens.end());
                             return true;
                           });
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(got, want);
  }
}

// The fixture every single-model golden suite shares: the golden set
// tests/data/golden/<kName> and its model loaded once per suite, the worst
// errors printed after it, and the logit check against the float64
// reference (relative error at most kLogitTolerance). The model loads with
// f32 matrices (a bf16 checkpoint widened exactly), as the reference
// multiplies: a bf16 load also rounds each matrix input to bf16
// (kernels/cpu/lowp_dot.h), which weights_dtype_test checks against these
// f32 kernels with a bf16 tolerance.
template <const char* kName>
class GoldenSuite : public ::testing::Test {
 protected:
  static constexpr double kLogitTolerance = 1e-4;

  static void SetUpTestSuite() {
    golden_ = GoldenData::Load(kName).release();
    if (golden_ != nullptr) {
      model_ = LoadOrDie(golden_->model_dir(), DType::kF32).release();
    }
  }
  static void TearDownTestSuite() {
    errors_.Print(kName);
    delete model_;
    model_ = nullptr;
    delete golden_;
    golden_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(golden_, nullptr);
    ASSERT_NE(model_, nullptr);
  }

  static void ExpectLogits(const std::vector<float>& got,
                           const std::vector<float>& want) {
    const double err = RelativeError(got, want);
    errors_.Logits(err);
    EXPECT_LE(err, kLogitTolerance);
  }

  static void ExpectGreedyContinuations() {
    ExpectGreedyContinuationsOf(*model_, *golden_);
  }

  static inline GoldenData* golden_ = nullptr;
  static inline Model* model_ = nullptr;
  static inline ErrorLog errors_;
};

}  // namespace twice::engine::testing

#endif  // TWICE_TESTS_ENGINE_GOLDEN_UTIL_H_
