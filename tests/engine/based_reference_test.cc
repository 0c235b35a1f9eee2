// The Based model against an independent float64 reference of the whole
// network, written here from the equations (not from the engine's kernels):
// the linear attention uses the kernel identity phi(q)·phi(k) = 1 + s + s²/2
// (s = q·k / sqrt(F)) in its quadratic form instead of feature maps and
// states; the sliding window is an explicit causal band mask over the full
// sequence with rotary applied in double; BaseConv is a direct causal
// convolution. Tiny preset, weights sharpened x10, 80 tokens (the window's
// left extent is 32). Tolerance: |got - want| <= 1e-4 + 1e-3 |want|.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/models/model.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using Mat = std::vector<double>;  // row-major

constexpr int kReferenceVocab = 300;
constexpr int kPadded = 304;
constexpr int kD = 64;
constexpr int kHeads = 4;
constexpr int kHd = kD / kHeads;
constexpr int kF = 16;
constexpr int kMlp = 256;    // n_inner 128 rounded up to a multiple of 256
constexpr int kConv = 128;   // expand_proj 4 · d / 2
constexpr int kWindow = 32;  // window_size 64 / 2
constexpr double kNormEps = 1e-5;

class Reference {
 public:
  explicit Reference(const std::map<std::string, Tensor>& w) : w_(w) {}

  // Logits of every position: [T, V_pad].
  Mat Forward(const std::vector<int32_t>& tokens) const {
    const int t = static_cast<int>(tokens.size());
    Mat x(t * kD);
    const Tensor& e = W("transformer.embeddings.word_embeddings.weight");
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j < kD; ++j) x[i * kD + j] = e.data()[tokens[i] * kD + j];
    }
    const char* kinds[4] = {"conv", "la", "swa", "conv"};
    for (int l = 0; l < 4; ++l) {
      const std::string p = "transformer.layers." + std::to_string(l) + ".";
      Mat h = RmsNorm(x, t, W(p + "norm1.weight"));
      Mat y;
      if (std::string(kinds[l]) == "conv") y = Conv(h, t, p);
      if (std::string(kinds[l]) == "la") y = LinearAttention(h, t, p);
      if (std::string(kinds[l]) == "swa") y = SlidingWindow(h, t, p);
      for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
      h = RmsNorm(x, t, W(p + "norm2.weight"));
      Mat u = Linear(h, t, kD, W(p + "mlp.fc1.weight"), 2 * kMlp);
      Mat a(t * kMlp);
      for (int i = 0; i < t; ++i) {
        for (int j = 0; j < kMlp; ++j) {
          a[i * kMlp + j] =
              u[i * 2 * kMlp + j] * Silu(u[i * 2 * kMlp + kMlp + j]);
        }
      }
      y = Linear(a, t, kMlp, W(p + "mlp.fc2.weight"), kD);
      for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }
    Mat h = RmsNorm(x, t, W("transformer.ln_f.weight"));
    return Linear(h, t, kD, e, kPadded);
  }

 private:
  const Tensor& W(const std::string& name) const { return w_.at(name); }

  static double Silu(double g) { return g / (1.0 + std::exp(-g)); }

  static Mat Linear(const Mat& x, int rows, int k, const Tensor& w, int n,
                    const Tensor* bias = nullptr) {
    Mat y(rows * n);
    for (int i = 0; i < rows; ++i) {
      for (int o = 0; o < n; ++o) {
        double acc = bias != nullptr ? bias->data()[o] : 0.0;
        for (int j = 0; j < k; ++j) acc += x[i * k + j] * w.data()[o * k + j];
        y[i * n + o] = acc;
      }
    }
    return y;
  }

  static Mat RmsNorm(const Mat& x, int rows, const Tensor& w) {
    Mat y(x.size());
    for (int i = 0; i < rows; ++i) {
      double ss = 0.0;
      for (int j = 0; j < kD; ++j) ss += x[i * kD + j] * x[i * kD + j];
      const double r = 1.0 / std::sqrt(ss / kD + kNormEps);
      for (int j = 0; j < kD; ++j)
        y[i * kD + j] = x[i * kD + j] * r * w.data()[j];
    }
    return y;
  }

  Mat Conv(const Mat& h, int t, const std::string& p) const {
    const Tensor& bias_in = W(p + "mixer.in_proj.bias");
    const Tensor& bias_out = W(p + "mixer.out_proj.bias");
    Mat u =
        Linear(h, t, kD, W(p + "mixer.in_proj.weight"), 2 * kConv, &bias_in);
    const Tensor& w = W(p + "mixer.conv.conv.weight");  // [C, 1, 3]
    Mat g(t * kConv);
    for (int i = 0; i < t; ++i) {
      for (int c = 0; c < kConv; ++c) {
        double acc = 0.0;
        for (int j = 0; j < 3; ++j) {
          const int src = i - 2 + j;
          if (src >= 0) acc += w.data()[c * 3 + j] * u[src * 2 * kConv + c];
        }
        g[i * kConv + c] = Silu(acc) * u[i * 2 * kConv + kConv + c];
      }
    }
    return Linear(g, t, kConv, W(p + "mixer.out_proj.weight"), kD, &bias_out);
  }

  Mat LinearAttention(const Mat& h, int t, const std::string& p) const {
    Mat q = Linear(h, t, kD, W(p + "mixer.proj_q.weight"), kHeads * kF);
    Mat k = Linear(h, t, kD, W(p + "mixer.proj_k.weight"), kHeads * kF);
    Mat v = Linear(h, t, kD, W(p + "mixer.proj_v.weight"), kD);
    Mat y(t * kD, 0.0);
    for (int hh = 0; hh < kHeads; ++hh) {
      for (int i = 0; i < t; ++i) {
        double den = 0.0;
        std::vector<double> num(kHd, 0.0);
        for (int j = 0; j <= i; ++j) {
          double s = 0.0;
          for (int f = 0; f < kF; ++f) {
            s += q[i * kHeads * kF + hh * kF + f] *
                 k[j * kHeads * kF + hh * kF + f];
          }
          s /= std::sqrt(double{kF});
          const double a = 1.0 + s + s * s / 2.0;
          den += a;
          for (int e = 0; e < kHd; ++e) num[e] += a * v[j * kD + hh * kHd + e];
        }
        for (int e = 0; e < kHd; ++e) y[i * kD + hh * kHd + e] = num[e] / den;
      }
    }
    return Linear(y, t, kD, W(p + "mixer.out_proj.weight"), kD);
  }

  static void Rope(Mat& x, int t, int stride, int offset) {
    for (int i = 0; i < t; ++i) {
      for (int hh = 0; hh < kHeads; ++hh) {
        double* r = &x[i * stride + offset + hh * kHd];
        for (int f = 0; f < kHd / 2; ++f) {
          const double angle = i * std::pow(10000.0, -2.0 * f / kHd);
          const double x1 = r[f], x2 = r[f + kHd / 2];
          r[f] = x1 * std::cos(angle) - x2 * std::sin(angle);
          r[f + kHd / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
    }
  }

  Mat SlidingWindow(const Mat& h, int t, const std::string& p) const {
    Mat qkv = Linear(h, t, kD, W(p + "mixer.Wqkv.weight"), 3 * kD);
    Rope(qkv, t, 3 * kD, 0);
    Rope(qkv, t, 3 * kD, kD);
    Mat y(t * kD, 0.0);
    for (int hh = 0; hh < kHeads; ++hh) {
      for (int i = 0; i < t; ++i) {
        const int lo = std::max(0, i - kWindow);
        std::vector<double> s(i - lo + 1);
        double mx = -1e300;
        for (int j = lo; j <= i; ++j) {
          double dot = 0.0;
          for (int e = 0; e < kHd; ++e) {
            dot += qkv[i * 3 * kD + hh * kHd + e] *
                   qkv[j * 3 * kD + kD + hh * kHd + e];
          }
          s[j - lo] = dot / std::sqrt(double{kHd});
          mx = std::max(mx, s[j - lo]);
        }
        double z = 0.0;
        for (double& x : s) z += (x = std::exp(x - mx));
        for (int j = lo; j <= i; ++j) {
          for (int e = 0; e < kHd; ++e) {
            y[i * kD + hh * kHd + e] +=
                s[j - lo] / z * qkv[j * 3 * kD + 2 * kD + hh * kHd + e];
          }
        }
      }
    }
    return Linear(y, t, kD, W(p + "mixer.out_proj.weight"), kD);
  }

  const std::map<std::string, Tensor>& w_;
};

void ExpectMatchesReference(const std::vector<float>& got, const Mat& want,
                            int position) {
  ASSERT_EQ(got.size(), static_cast<size_t>(kPadded));
  for (int v = 0; v < kPadded; ++v) {
    const double ref = want[position * kPadded + v];
    ASSERT_NEAR(got[v], ref, 1e-4 + 1e-3 * std::abs(ref))
        << "position " << position << ", logit " << v;
  }
}

TEST(BasedReferenceTest, PrefillAndStepMatchFloat64Reference) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteTinyModel(dir.Sub("m"), 11, kReferenceVocab));
  ASSERT_OK(testing::SharpenWeights(dir.Sub("m"), 10.0f));
  auto weights = testing::ReadAllWeights(dir.Sub("m") + "/model.safetensors");
  ASSERT_OK(weights);
  auto model = testing::LoadOrDie(dir.Sub("m"));
  ASSERT_NE(model, nullptr);

  const std::vector<int32_t> tokens =
      testing::RandomTokens(80, kReferenceVocab, 12);
  const Mat ref = Reference(*weights).Forward(tokens);

  // The reference must be sensitive: its logits vary across the vocabulary.
  double spread = 0.0;
  for (int v = 1; v < kPadded; ++v) {
    spread =
        std::max(spread, std::abs(ref[79 * kPadded + v] - ref[79 * kPadded]));
  }
  EXPECT_GT(spread, 0.1);

  for (int n : {1, 2, 3, 17, 32, 33, 34, 64, 80}) {
    auto state = model->NewState();
    std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + n);
    auto logits = model->Prefill(prefix, *state, PrefillMode::kCausal);
    ASSERT_OK(logits);
    ExpectMatchesReference(*logits, ref, n - 1);
  }
  // Token-by-token decoding from scratch follows the same reference.
  auto state = model->NewState();
  for (int i = 0; i < 80; ++i) {
    auto logits = model->Step(tokens[i], *state);
    ASSERT_OK(logits);
    ExpectMatchesReference(*logits, ref, i);
  }
}

}  // namespace
}  // namespace twice::engine
