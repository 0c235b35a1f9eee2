// PrefixLinearAttention (JRT-RNN PLA) as a layer, against an explicit
// O(N^2) float64 evaluation of the JRT formulas written here from the fact
// sheet (4.2 - 4.4), not from the engine's kernels:
//   q, kd, vd = x W^T over all N rows; ke, ve over the first M' rows;
//   raw kd, ke of the first P rows (pads) zeroed before the feature map;
//   K(a, b) = phi(a) · phi(b) = 1 + s + s^2 / 2, s = a · b / sqrt(F)
//   num_i = sum_{j<=i} K(q_i, kd_j) vd_j + sum_{j<M'} K(q_i, ke_j) ve_j
//   den_i = sum_{j<=i} K(q_i, kd_j)      + sum_{j<M'} K(q_i, ke_j)
//   out_i = (num_i · (1 / (den_i + 1e-12))) Wo^T
// and the merged state of 4.3 built from an explicit phi in double:
//   S = sum_{j<M'} ve_j ⊗ phi(ke_j) + sum_{j<N} vd_j ⊗ phi(kd_j), z alike;
// then one decode step and a causal multi-token continuation from that state
// (plain Based recurrence, decoder projections only). Encoder lengths below,
// equal to and above N, with and without pads. Random inputs, d 32, H 2,
// F 16. Tolerance: 2e-5 absolute + 1e-4 relative.
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/layers/linear_attention_state.h"
#include "engine/layers/prefix_linear_attention.h"
#include "engine/weights/safetensors_writer.h"
#include "engine/weights/weight_map.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using Mat = std::vector<double>;  // row-major

constexpr int kDim = 32, kHeads = 2, kHd = kDim / kHeads, kF = 16;
constexpr int kFeat = 1 + kF + kF * kF;
constexpr double kEps = 1e-12;
constexpr char kPrefix[] = "layer.";

std::vector<float> Random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class PlaLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Weights of std 0.25 on inputs of std 1 give raw q, k entries around
    // 1.4: the quadratic Taylor term matters and masking shows.
    const std::map<std::string, std::pair<int, int>> shapes = {
        {"proj_q", {kHeads * kF, kDim}}, {"proj_k", {kHeads * kF, kDim}},
        {"proj_v", {kDim, kDim}},        {"proj_k_enc", {kHeads * kF, kDim}},
        {"proj_v_enc", {kDim, kDim}},    {"out_proj", {kDim, kDim}}};
    uint32_t seed = 10;
    for (const auto& [name, shape] : shapes) {
      w_[name] = Tensor::FromVector(
          {shape.first, shape.second},
          Random(static_cast<size_t>(shape.first) * shape.second, ++seed,
                 0.25f));
    }
    std::vector<NamedTensor> named;
    std::map<std::string, Tensor> stored;
    for (const auto& [name, t] : w_) {
      stored.emplace(
          std::string(kPrefix) + "mixer." + name + ".weight",
          Tensor::FromVector(
              t.shape(), std::vector<float>(t.data(), t.data() + t.size())));
    }
    for (const auto& [name, t] : stored) named.push_back({name, &t});
    ASSERT_TRUE(
        WriteSafetensors(dir_.Sub("model.safetensors"), std::move(named)).ok());
    auto weights = WeightMap::OpenDir(
        dir_.path(), [](std::string_view n) { return std::string(n); });
    ASSERT_OK(weights);
    weights_ = *std::move(weights);
    LinearAttentionOptions o;
    o.dim = kDim;
    o.heads = kHeads;
    o.feature_dim = kF;
    auto layer = PrefixLinearAttention::Load(weights_, kPrefix, o);
    ASSERT_OK(layer);
    layer_ = *std::move(layer);
  }

  // x [rows, d] · W^T, W [n, d].
  Mat Project(const std::vector<float>& x, int rows, const std::string& name,
              int first = 0) const {
    const Tensor& w = w_.at(name);
    const int n = static_cast<int>(w.shape()[0]);
    Mat y(static_cast<size_t>(rows) * n);
    for (int i = 0; i < rows; ++i) {
      for (int o = 0; o < n; ++o) {
        double s = 0.0;
        for (int c = 0; c < kDim; ++c) {
          s += double{x[(first + i) * kDim + c]} * w.data()[o * kDim + c];
        }
        y[i * n + o] = s;
      }
    }
    return y;
  }

  static double Kernel(const Mat& a, int ia, const Mat& b, int ib, int h) {
    double s = 0.0;
    for (int m = 0; m < kF; ++m) {
      s += a[ia * kHeads * kF + h * kF + m] * b[ib * kHeads * kF + h * kF + m];
    }
    s /= std::sqrt(double{kF});
    return 1.0 + s + s * s / 2.0;
  }

  // phi of head h of row i of a [rows, H·F] matrix, as fact sheet 2.2.2.
  static std::vector<double> Phi(const Mat& a, int i, int h) {
    const double* x = &a[i * kHeads * kF + h * kF];
    std::vector<double> out(kFeat);
    out[0] = 1.0;
    for (int m = 0; m < kF; ++m) out[1 + m] = x[m] / std::pow(kF, 0.25);
    for (int m = 0; m < kF; ++m) {
      for (int n = 0; n < kF; ++n) {
        out[1 + kF + m * kF + n] =
            x[m] * x[n] / (std::sqrt(2.0) * std::sqrt(double{kF}));
      }
    }
    return out;
  }

  static void MaskRows(Mat& k, int rows) {
    for (int i = 0; i < rows * kHeads * kF; ++i) k[i] = 0.0;
  }

  // y [rows, d] · Wo^T.
  Mat OutProj(const Mat& y, int rows) const {
    const Tensor& w = w_.at("out_proj");
    Mat out(static_cast<size_t>(rows) * kDim);
    for (int i = 0; i < rows; ++i) {
      for (int o = 0; o < kDim; ++o) {
        double s = 0.0;
        for (int c = 0; c < kDim; ++c)
          s += y[i * kDim + c] * w.data()[o * kDim + c];
        out[i * kDim + o] = s;
      }
    }
    return out;
  }

  static void ExpectNear(absl::Span<const float> got, const Mat& want,
                         const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5 + 1e-4 * std::abs(want[i]))
          << what << " at " << i;
    }
  }

  testing::TempDir dir_;
  std::map<std::string, Tensor> w_;  // short name -> weight
  WeightMap weights_;
  std::unique_ptr<PrefixLinearAttention> layer_;
};

struct Case {
  int tokens;   // N
  int encoder;  // M' (the model passes min(M, N))
  int masked;   // P pads
};

TEST_F(PlaLayerTest, PrefixReadMatchesTheQuadraticFormAndMergesTheState) {
  for (const Case& c : {Case{1, 1, 0}, Case{10, 10, 0}, Case{16, 16, 0},
                        Case{16, 16, 6}, Case{40, 16, 0}, Case{100, 16, 0},
                        Case{70, 70, 5}, Case{130, 96, 30}}) {
    const std::string what = "N " + std::to_string(c.tokens) + " M' " +
                             std::to_string(c.encoder) + " P " +
                             std::to_string(c.masked);
    const int n = c.tokens, e = c.encoder, p = c.masked;
    const int extra = 70;  // causal continuation after the prefix
    const std::vector<float> x = Random(
        static_cast<size_t>(n + 1 + extra) * kDim, 100 + n + e + p, 1.0f);

    Mat q = Project(x, n + 1 + extra, "proj_q");
    Mat kd = Project(x, n + 1 + extra, "proj_k");
    Mat vd = Project(x, n + 1 + extra, "proj_v");
    Mat ke = Project(x, e, "proj_k_enc");
    Mat ve = Project(x, e, "proj_v_enc");
    MaskRows(kd, p);
    MaskRows(ke, p);

    // 4.2: every prefix query sees its causal keys and the whole encoder.
    Mat y(static_cast<size_t>(n) * kDim);
    for (int h = 0; h < kHeads; ++h) {
      for (int i = 0; i < n; ++i) {
        std::vector<double> num(kHd, 0.0);
        double den = 0.0;
        for (int j = 0; j <= i; ++j) {
          const double a = Kernel(q, i, kd, j, h);
          den += a;
          for (int c2 = 0; c2 < kHd; ++c2)
            num[c2] += a * vd[j * kDim + h * kHd + c2];
        }
        for (int j = 0; j < e; ++j) {
          const double a = Kernel(q, i, ke, j, h);
          den += a;
          for (int c2 = 0; c2 < kHd; ++c2)
            num[c2] += a * ve[j * kDim + h * kHd + c2];
        }
        for (int c2 = 0; c2 < kHd; ++c2) {
          y[i * kDim + h * kHd + c2] = num[c2] * (1.0 / (den + kEps));
        }
      }
    }
    auto state = layer_->NewState();
    std::vector<float> out(static_cast<size_t>(n) * kDim);
    PrefixEncoding prefix;
    prefix.encoder_tokens = e;
    prefix.masked_tokens = p;
    ASSERT_TRUE(layer_
                    ->ForwardPrefix(absl::MakeConstSpan(x).subspan(0, n * kDim),
                                    n, prefix, *state, absl::MakeSpan(out))
                    .ok());
    ExpectNear(out, OutProj(y, n), what + " prefix output");

    // 4.3: the encoder is merged into the ordinary recurrent state.
    Mat s(kHeads * kHd * kFeat, 0.0), z(kHeads * kFeat, 0.0);
    auto accumulate = [&](const Mat& k, const Mat& v, int j) {
      for (int h = 0; h < kHeads; ++h) {
        const std::vector<double> f = Phi(k, j, h);
        for (int m = 0; m < kFeat; ++m) {
          z[h * kFeat + m] += f[m];
          for (int c2 = 0; c2 < kHd; ++c2) {
            s[(h * kHd + c2) * kFeat + m] += v[j * kDim + h * kHd + c2] * f[m];
          }
        }
      }
    };
    for (int j = 0; j < e; ++j) accumulate(ke, ve, j);
    for (int j = 0; j < n; ++j) accumulate(kd, vd, j);
    auto* la = dynamic_cast<LinearAttentionState*>(state.get());
    ASSERT_NE(la, nullptr);
    ExpectNear(la->kv(), s, what + " merged S");
    ExpectNear(la->k_sum(), z, what + " merged z");

    // Decoding is Based decoding from the merged state (update, then read).
    auto read = [&](int i) {
      Mat yi(kDim);
      for (int h = 0; h < kHeads; ++h) {
        const std::vector<double> f = Phi(q, i, h);
        double den = 0.0;
        for (int m = 0; m < kFeat; ++m) den += f[m] * z[h * kFeat + m];
        for (int c2 = 0; c2 < kHd; ++c2) {
          double num = 0.0;
          for (int m = 0; m < kFeat; ++m) {
            num += f[m] * s[(h * kHd + c2) * kFeat + m];
          }
          yi[h * kHd + c2] = num / (den + kEps);
        }
      }
      return OutProj(yi, 1);
    };
    accumulate(kd, vd, n);
    std::vector<float> step(kDim);
    ASSERT_TRUE(layer_
                    ->Forward(absl::MakeConstSpan(x).subspan(n * kDim, kDim), 1,
                              n, *state, absl::MakeSpan(step))
                    .ok());
    ExpectNear(step, read(n), what + " step");

    // A causal multi-token read continues the same recurrence.
    Mat want_rest;
    for (int i = n + 1; i <= n + extra; ++i) {
      accumulate(kd, vd, i);
      const Mat yi = read(i);
      want_rest.insert(want_rest.end(), yi.begin(), yi.end());
    }
    std::vector<float> rest(static_cast<size_t>(extra) * kDim);
    ASSERT_TRUE(layer_
                    ->Forward(absl::MakeConstSpan(x).subspan((n + 1) * kDim,
                                                             extra * kDim),
                              extra, n + 1, *state, absl::MakeSpan(rest))
                    .ok());
    ExpectNear(rest, want_rest, what + " causal continuation");
  }
}

TEST_F(PlaLayerTest, PadKeysStillContributeTheConstantFeature) {
  // Masking zeroes raw keys only: a masked position adds exactly v_j ⊗ e_0
  // to S and 1 to z[0] (phi(0) = (1, 0, ..., 0)), as the released code does.
  const int n = 8;
  const std::vector<float> x = Random(n * kDim, 7, 1.0f);
  auto masked = layer_->NewState();
  auto unmasked = layer_->NewState();
  std::vector<float> out(n * kDim);
  ASSERT_TRUE(
      layer_->ForwardPrefix(x, n, {n, n}, *masked, absl::MakeSpan(out)).ok());
  auto* la = dynamic_cast<LinearAttentionState*>(masked.get());
  // Every key is masked: z = 2n on the constant feature (decoder + encoder),
  // 0 elsewhere; S[., e, 0] = sum of decoder and encoder values.
  for (int h = 0; h < kHeads; ++h) {
    EXPECT_FLOAT_EQ(la->k_sum()[h * kFeat], 2.0f * n);
    for (int m = 1; m < kFeat; ++m) EXPECT_EQ(la->k_sum()[h * kFeat + m], 0.0f);
  }
  const Mat vd = Project(x, n, "proj_v");
  const Mat ve = Project(x, n, "proj_v_enc");
  for (int h = 0; h < kHeads; ++h) {
    for (int c = 0; c < kHd; ++c) {
      double want = 0.0;
      for (int j = 0; j < n; ++j) {
        want += vd[j * kDim + h * kHd + c] + ve[j * kDim + h * kHd + c];
      }
      EXPECT_NEAR(la->kv()[(h * kHd + c) * kFeat], want, 1e-4);
    }
  }
  ASSERT_TRUE(
      layer_->ForwardPrefix(x, n, {n, 0}, *unmasked, absl::MakeSpan(out)).ok());
  EXPECT_NE(la->k_sum()[1],
            dynamic_cast<LinearAttentionState*>(unmasked.get())->k_sum()[1]);
}

TEST_F(PlaLayerTest, RejectsInconsistentPrefixes) {
  const std::vector<float> x = Random(4 * kDim, 3, 1.0f);
  std::vector<float> out(4 * kDim);
  for (PrefixEncoding bad : {PrefixEncoding{5, 0}, PrefixEncoding{2, 3},
                             PrefixEncoding{-1, 0}, PrefixEncoding{2, -1}}) {
    auto state = layer_->NewState();
    EXPECT_EQ(
        layer_->ForwardPrefix(x, 4, bad, *state, absl::MakeSpan(out)).code(),
        absl::StatusCode::kInvalidArgument)
        << bad.encoder_tokens << " " << bad.masked_tokens;
  }
}

TEST_F(PlaLayerTest, MissingEncoderProjectionIsNamed) {
  std::filesystem::remove(dir_.Sub("model.safetensors"));
  std::map<std::string, Tensor> only_based;
  for (const char* name : {"proj_q", "proj_k", "proj_v", "out_proj"}) {
    const Tensor& t = w_.at(name);
    only_based.emplace(
        std::string(kPrefix) + "mixer." + name + ".weight",
        Tensor::FromVector(t.shape(),
                           std::vector<float>(t.data(), t.data() + t.size())));
  }
  ASSERT_TRUE(
      testing::WriteAllWeights(dir_.Sub("model.safetensors"), only_based).ok());
  auto weights = WeightMap::OpenDir(
      dir_.path(), [](std::string_view n) { return std::string(n); });
  ASSERT_OK(weights);
  LinearAttentionOptions o;
  o.dim = kDim;
  o.heads = kHeads;
  auto layer = PrefixLinearAttention::Load(*weights, kPrefix, o);
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("proj_k_enc"), std::string::npos)
      << layer.status();
}

}  // namespace
}  // namespace twice::engine
