// The CUDA row-wise and element-wise kernels (elementwise_cuda.cu,
// ssm_gating_cuda.cu, the convolution of sequence_cuda.cu and the feature
// map of based_cuda.cu) replayed on the CPU (cuda_replay.h) against their
// CPU twins, in both thread orders.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/causal_conv1d.h"
#include "kernels/cuda/launch.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/ssm_gating.h"
#include "kernels/taylor_feature_map.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using testing::kF32Tolerance;
using testing::kThreadOrders;
using testing::Random;
using testing::RoundedToBf16;
using testing::ToBf16Bits;

std::vector<float> FromBf16Bits(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint32_t word = uint32_t{bits[i]} << 16;
    std::memcpy(&out[i], &word, 4);
  }
  return out;
}

std::vector<float> RoundedToBf16(std::vector<float> v) {
  for (float& x : v) x = testing::RoundedToBf16(x);
  return v;
}

// Runs `launch` in both thread orders; each must give `want` within
// `tolerance` (0: bit for bit) in what `result` returns.
template <typename Launch, typename Result>
void InBothOrders(const std::vector<float>& want, double tolerance,
                  Launch launch, Result result) {
  for (const ThreadOrder order : kThreadOrders) {
    SCOPED_TRACE(order == ThreadOrder::kIncreasing ? "increasing"
                                                   : "decreasing");
    SetThreadOrder(order);
    ASSERT_EQ(launch(), cudaSuccess);
    const std::vector<float> got = result();
    if (tolerance == 0.0) {
      EXPECT_EQ(got, want);
    } else {
      TWICE_EXPECT_REPLAY_REL(got, want, tolerance);
    }
  }
}

TEST(ElementwiseReplayTest, RmsNormMatchesCpuInBothOutputs) {
  for (const int64_t dim : {64, 1000}) {
    const int64_t rows = 9;
    const std::vector<float> x = Random(rows * dim, 1, 3.0f);
    const std::vector<float> w = Random(dim, 2);
    std::vector<float> want(rows * dim);
    ASSERT_TRUE(
        kernels::RmsNorm(x, rows, dim, w, 1e-5f, absl::MakeSpan(want)).ok());
    std::vector<float> y;
    std::vector<uint16_t> y16;
    InBothOrders(
        want, kF32Tolerance,
        [&] {
          y.assign(rows * dim, NAN);
          y16.assign(rows * dim, 0x7FC0);
          return launch::RmsNorm(x.data(), rows, static_cast<int>(dim),
                                 w.data(), 1e-5f, y.data(), y16.data(),
                                 nullptr);
        },
        [&] { return y; });
    // The bf16 copy is the f32 rows rounded, bit for bit.
    EXPECT_EQ(FromBf16Bits(y16), RoundedToBf16(y));
  }
}

TEST(ElementwiseReplayTest, RopeMatchesCpu) {
  const int64_t rows = 7, heads = 3, hd = 64, stride = 3 * heads * hd;
  const std::vector<float> x = Random(rows * stride, 3);
  std::vector<float> want = x;
  ASSERT_TRUE(kernels::RopeRotateHalf(absl::MakeSpan(want), rows, stride, heads,
                                      hd, 100000, 10000.0f)
                  .ok());
  std::vector<float> got;
  InBothOrders(
      want, kF32Tolerance,
      [&] {
        got = x;
        return launch::RopeRotateHalf(
            got.data(), rows, stride, static_cast<int>(heads),
            static_cast<int>(hd), 100000, 10000.0f, nullptr);
      },
      [&] { return got; });
  const std::vector<int64_t> positions = {0, 5, 4, 70000, 1, 2, 3};
  want = x;
  ASSERT_TRUE(kernels::RopeRotateHalfAt(absl::MakeSpan(want), rows, stride,
                                        heads, hd, positions, 10000.0f)
                  .ok());
  InBothOrders(
      want, kF32Tolerance,
      [&] {
        got = x;
        return launch::RopeRotateHalfAt(
            got.data(), rows, stride, static_cast<int>(heads),
            static_cast<int>(hd), positions.data(), 10000.0f, nullptr);
      },
      [&] { return got; });
}

TEST(ElementwiseReplayTest, ActivationsMatchCpu) {
  const int64_t rows = 5, cols = 300, stride = 2 * cols;
  const std::vector<float> u = Random(rows * stride, 4, 4.0f);
  const absl::Span<const float> h(u);
  std::vector<float> silu_mul(rows * cols);
  ASSERT_TRUE(kernels::SiluMul(h, stride, h.subspan(cols), stride, rows, cols,
                               absl::MakeSpan(silu_mul))
                  .ok());
  std::vector<float> got;
  InBothOrders(
      silu_mul, kF32Tolerance,
      [&] {
        got.assign(rows * cols, NAN);
        return launch::SiluMul(u.data(), stride, u.data() + cols, stride, rows,
                               cols, got.data(), nullptr);
      },
      [&] { return got; });
  // The same three activations straight to bf16 (a GEMM's input).
  std::vector<float> dense(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dense.data() + r * cols, u.data() + r * stride,
                cols * sizeof(float));
  }
  std::vector<float> relu2 = dense, gelu = dense;
  kernels::ReluSquared(absl::MakeSpan(relu2));
  kernels::Gelu(absl::MakeSpan(gelu));
  const std::vector<float>* wants[] = {&silu_mul, &relu2, &gelu};
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(::testing::Message() << "kind " << kind);
    std::vector<uint16_t> bits;
    InBothOrders(
        RoundedToBf16(*wants[kind]), testing::kBf16Tolerance,
        [&] {
          bits.assign(rows * cols, 0x7FC0);
          return launch::ActivationToBf16(kind, u.data(), stride,
                                          u.data() + cols, stride, rows, cols,
                                          bits.data(), nullptr);
        },
        [&] { return FromBf16Bits(bits); });
  }
  InBothOrders(
      relu2, 0.0,
      [&] {
        got = dense;
        return launch::ReluSquared(got.data(), rows * cols, nullptr);
      },
      [&] { return got; });
  InBothOrders(
      gelu, kF32Tolerance,
      [&] {
        got.assign(rows * cols, NAN);
        return launch::Gelu(dense.data(), rows * cols, got.data(), nullptr);
      },
      [&] { return got; });
}

TEST(ElementwiseReplayTest, EmbeddingAndConversionsAreExact) {
  const int64_t vocab = 50, dim = 96;
  const std::vector<float> table = RoundedToBf16(Random(vocab * dim, 6));
  std::vector<uint16_t> table_bits;
  for (const float v : table) table_bits.push_back(ToBf16Bits(v));
  const std::vector<int32_t> ids = {0, 49, 5, 5, 17};
  std::vector<float> want;
  for (const int32_t id : ids) {
    for (int64_t e = 0; e < dim; ++e)
      want.push_back(table[id * dim + e] * 0.75f);
  }
  std::vector<float> got;
  InBothOrders(
      want, 0.0,
      [&] {
        got.assign(want.size(), NAN);
        return launch::Embedding(ids.data(), static_cast<int64_t>(ids.size()),
                                 table_bits.data(), dim, 0.75f, got.data(),
                                 nullptr);
      },
      [&] { return got; });

  const std::vector<float> x = Random(1001, 9, 100.0f);
  std::vector<uint16_t> bits;
  InBothOrders(
      RoundedToBf16(x), 0.0,
      [&] {
        bits.assign(x.size(), 0);
        if (const cudaError_t e = launch::F32ToBf16(
                x.data(), static_cast<int64_t>(x.size()), bits.data(), nullptr);
            e != cudaSuccess) {
          return e;
        }
        got.assign(x.size(), NAN);
        return launch::Bf16ToF32(bits.data(), static_cast<int64_t>(x.size()),
                                 got.data(), nullptr);
      },
      [&] { return got; });

  // Every finite f16 value to bf16: decoded by hand, then rounded.
  std::vector<uint16_t> halves;
  std::vector<float> half_values;
  for (uint32_t h = 0; h < 65536; h += 7) {
    const int exponent = static_cast<int>(h >> 10 & 31);
    if (exponent == 31) continue;  // inf and NaN
    const float magnitude =
        exponent == 0
            ? std::ldexp(static_cast<float>(h & 1023), -24)
            : std::ldexp(static_cast<float>(1024 + (h & 1023)), exponent - 25);
    halves.push_back(static_cast<uint16_t>(h));
    half_values.push_back((h & 0x8000) != 0 ? -magnitude : magnitude);
  }
  InBothOrders(
      RoundedToBf16(half_values), 0.0,
      [&] {
        bits.assign(halves.size(), 0x7FC0);
        return launch::F16ToBf16(halves.data(),
                                 static_cast<int64_t>(halves.size()),
                                 bits.data(), nullptr);
      },
      [&] { return FromBf16Bits(bits); });

  // int8 rows with a scale per block of 64 (kernels/dtype.h kI8Block).
  const int64_t rows = 3, cols = 150, blocks = 3;
  std::vector<int8_t> values(rows * cols);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  }
  const std::vector<float> scales = Random(rows * blocks, 10);
  std::vector<float> dequantized(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      dequantized[r * cols + c] = testing::RoundedToBf16(
          values[r * cols + c] * scales[r * blocks + c / 64]);
    }
  }
  InBothOrders(
      dequantized, 0.0,
      [&] {
        bits.assign(rows * cols, 0);
        return launch::I8RowsToBf16(values.data(), scales.data(), rows, cols,
                                    bits.data(), nullptr);
      },
      [&] { return FromBf16Bits(bits); });
}

TEST(ElementwiseReplayTest, SsmGatingMatchesCpu) {
  const int64_t rows = 6, cols = 160, heads = 8, stride = 296;
  const std::vector<float> x = Random(rows * cols, 1, 6.0f);
  const std::vector<float> bias = Random(cols, 2);
  std::vector<float> want = x;
  ASSERT_TRUE(kernels::BiasSiluRows(absl::MakeSpan(want), rows, bias).ok());
  std::vector<float> got;
  InBothOrders(
      want, kF32Tolerance,
      [&] {
        got = x;
        return launch::BiasSiluRows(got.data(), rows, cols, bias.data(),
                                    nullptr);
      },
      [&] { return got; });

  const std::vector<float> raw = Random(rows * stride, 3, 30.0f);
  const std::vector<float> dt_bias = Random(heads, 4);
  want.assign(rows * heads, 0.0f);
  ASSERT_TRUE(kernels::SoftplusBiasRows(absl::MakeConstSpan(raw).subspan(5),
                                        rows, stride, dt_bias,
                                        absl::MakeSpan(want))
                  .ok());
  InBothOrders(
      want, kF32Tolerance,
      [&] {
        got.assign(rows * heads, NAN);
        return launch::SoftplusBiasRows(raw.data() + 5, rows, stride, heads,
                                        dt_bias.data(), got.data(), nullptr);
      },
      [&] { return got; });

  for (const auto& [width, groups] : {std::tuple<int64_t, int64_t>{128, 1},
                                      std::tuple<int64_t, int64_t>{512, 8}}) {
    SCOPED_TRACE(::testing::Message()
                 << "width " << width << " groups " << groups);
    const int64_t z_stride = width + 40;
    const std::vector<float> z = Random(rows * z_stride, 5, 4.0f);
    const std::vector<float> y = Random(rows * width, 6, 2.0f);
    const std::vector<float> w = Random(width, 7);
    want.assign(rows * width, 0.0f);
    ASSERT_TRUE(kernels::GatedGroupRmsNorm(z, z_stride, y, rows, width, groups,
                                           w, 1e-5, absl::MakeSpan(want))
                    .ok());
    // In place over y, as the Mamba-2 mixer calls it.
    InBothOrders(
        want, kF32Tolerance,
        [&] {
          got = y;
          return launch::GatedGroupRmsNorm(z.data(), z_stride, got.data(), rows,
                                           width, groups, w.data(), 1e-5,
                                           got.data(), nullptr);
        },
        [&] { return got; });
  }
}

TEST(ElementwiseReplayTest, ConvolutionAndFeatureMapMatchCpu) {
  const int64_t tokens = 37, channels = 70, stride = 80, kernel = 4;
  const std::vector<float> x = Random(tokens * stride, 11);
  const std::vector<float> w = Random(channels * kernel, 12);
  const std::vector<float> tail = Random(channels * (kernel - 1), 13);
  std::vector<float> want(tokens * channels), want_tail = tail;
  ASSERT_TRUE(kernels::CausalConv1d(x, tokens, channels, stride, w, kernel,
                                    absl::MakeSpan(want_tail),
                                    absl::MakeSpan(want))
                  .ok());
  std::vector<float> got, got_tail;
  InBothOrders(
      want, kF32Tolerance,
      [&] {
        got.assign(want.size(), NAN);
        got_tail = tail;
        return launch::CausalConv1d(x.data(), tokens, channels, stride,
                                    w.data(), static_cast<int>(kernel),
                                    got_tail.data(), got.data(), nullptr);
      },
      [&] { return got; });
  EXPECT_EQ(got_tail, want_tail);

  for (const int f : {4, 16}) {
    const int64_t rows = 11;
    const std::vector<float> raw = Random(rows * f, 14);
    std::vector<float> features(rows * kernels::TaylorFeatureDim(f));
    ASSERT_TRUE(
        kernels::TaylorFeatureMap(raw, rows, f, absl::MakeSpan(features)).ok());
    InBothOrders(
        features, kF32Tolerance,
        [&] {
          got.assign(features.size(), NAN);
          return launch::TaylorFeatureMap(raw.data(), rows, f, got.data(),
                                          nullptr);
        },
        [&] { return got; });
  }
}

}  // namespace
}  // namespace twice::cuda_replay
