// Row-wise and element-wise CUDA kernels against their CPU twins (f32,
// 1e-5; bf16 outputs 1e-2): RMSNorm, RoPE, SiLU gating / SwiGLU, GELU,
// embedding, conversions (sampling: sampling_cuda_test.cc).
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::Random;
using testing::RoundBf16;

using ElementwiseCudaTest = CudaTest;

TEST_F(ElementwiseCudaTest, RmsNormMatchesCpu) {
  for (int64_t dim : {64, 1000, 2048}) {
    const int64_t rows = 33;
    const std::vector<float> x = Random(rows * dim, 1, 3.0f);
    const std::vector<float> w = Random(dim, 2);
    std::vector<float> want(rows * dim);
    ASSERT_TRUE(
        kernels::RmsNorm(x, rows, dim, w, 1e-5f, absl::MakeSpan(want)).ok());
    DeviceBuffer dx = Put(x), dw = Put(w);
    DeviceBuffer dy = Zeros<float>(rows * dim);
    DeviceBuffer dy2 = Zeros<float>(rows * dim);
    DeviceBuffer dy16 = Zeros<Bf16>(rows * dim);
    ASSERT_TRUE(RmsNorm(*stream_, dx.span<float>(), rows, dim, dw.span<float>(),
                        1e-5f, dy.span<float>())
                    .ok());
    ASSERT_OK(RmsNorm(*stream_, dx.span<float>(), rows, dim, dw.span<float>(),
                      1e-5f, dy2.span<float>(), dy16.span<Bf16>()));
    const std::vector<float> y = Get<float>(dy);
    TWICE_EXPECT_REL(y, want, kF32Tolerance);
    // Both outputs in one pass: the same f32 rows, and their bf16 rounding
    // bit for bit (what a GEMM's input conversion would make of them).
    EXPECT_EQ(Get<float>(dy2), y);
    EXPECT_EQ(GetBf16(dy16), RoundBf16(y));
    TWICE_EXPECT_REL(GetBf16(dy16), want, kBf16Tolerance);
  }
}

TEST_F(ElementwiseCudaTest, RopeMatchesCpuAtLongPositions) {
  const int64_t rows = 19, heads = 4, hd = 64, stride = 3 * heads * hd;
  for (int64_t start : {0, 100000}) {
    std::vector<float> x = Random(rows * stride, 3);
    DeviceBuffer dx = Put(x);
    ASSERT_TRUE(kernels::RopeRotateHalf(absl::MakeSpan(x), rows, stride, heads,
                                        hd, start, 10000.0f)
                    .ok());
    ASSERT_TRUE(RopeRotateHalf(*stream_, dx.span<float>(), rows, stride, heads,
                               hd, start, 10000.0f)
                    .ok());
    TWICE_EXPECT_REL(Get<float>(dx), x, kF32Tolerance);
  }
}

TEST_F(ElementwiseCudaTest, SiluMulAndSwiGluMatchCpu) {
  const int64_t rows = 21, hidden = 300;
  const std::vector<float> u = Random(rows * 2 * hidden, 4, 4.0f);
  std::vector<float> want(rows * hidden);
  ASSERT_OK(kernels::SwiGlu(u, rows, hidden, absl::MakeSpan(want)));
  DeviceBuffer du = Put(u);
  DeviceBuffer dout = Zeros<float>(rows * hidden);
  ASSERT_TRUE(
      SwiGlu(*stream_, du.span<float>(), rows, hidden, dout.span<float>())
          .ok());
  TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);

  // SiluMul with the gate as the first half.
  const absl::Span<const float> h(u);
  ASSERT_TRUE(kernels::SiluMul(h, 2 * hidden, h.subspan(hidden), 2 * hidden,
                               rows, hidden, absl::MakeSpan(want))
                  .ok());
  const DeviceSpan<const float> d = du.span<float>();
  ASSERT_TRUE(SiluMul(*stream_, d, 2 * hidden,
                      d.subspan(hidden, d.size - hidden), 2 * hidden, rows,
                      hidden, dout.span<float>())
                  .ok());
  TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
}

TEST_F(ElementwiseCudaTest, GeluMatchesExactErf) {
  const std::vector<float> x = Random(5000, 5, 6.0f);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i];
    want[i] =
        static_cast<float>(0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0))));
  }
  DeviceBuffer dx = Put(x);
  DeviceBuffer dy = Zeros<float>(static_cast<int64_t>(x.size()));
  ASSERT_OK(Gelu(*stream_, dx.span<float>(), dy.span<float>()));
  TWICE_EXPECT_REL(Get<float>(dy), want, kF32Tolerance);
}

TEST_F(ElementwiseCudaTest, ReluSquaredMatchesTheCpu) {
  const std::vector<float> x = Random(5001, 7, 3.0f);
  std::vector<float> want = x;
  kernels::ReluSquared(absl::MakeSpan(want));
  DeviceBuffer dx = Put(x);
  ASSERT_OK(ReluSquared(*stream_, dx.span<float>()));
  EXPECT_EQ(Get<float>(dx), want);  // one multiply: exact
}

TEST_F(ElementwiseCudaTest, EmbeddingGathersRows) {
  const int64_t vocab = 1000, dim = 96;
  const std::vector<float> table = RoundBf16(Random(vocab * dim, 6));
  const std::vector<int32_t> ids = {0, 999, 5, 5, 123};
  std::vector<float> want;
  for (int32_t id : ids) {
    want.insert(want.end(), table.begin() + id * dim,
                table.begin() + (id + 1) * dim);
  }
  DeviceBuffer dt = PutBf16(table);
  DeviceBuffer dout = Zeros<float>(static_cast<int64_t>(ids.size()) * dim);
  ASSERT_TRUE(Embedding(*stream_, *allocator_, ids, dt.span<Bf16>(), vocab, dim,
                        1.0f, dout.span<float>())
                  .ok());
  EXPECT_EQ(Get<float>(dout), want);
  // Granite-4.0-H's embedding multiplier: one multiply, exact here.
  ASSERT_TRUE(Embedding(*stream_, *allocator_, ids, dt.span<Bf16>(), vocab, dim,
                        0.75f, dout.span<float>())
                  .ok());
  for (float& v : want) v *= 0.75f;
  EXPECT_EQ(Get<float>(dout), want);
  const std::vector<int32_t> bad = {1000};
  DeviceBuffer one = Zeros<float>(dim);
  EXPECT_EQ(Embedding(*stream_, *allocator_, bad, dt.span<Bf16>(), vocab, dim,
                      1.0f, one.span<float>())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ElementwiseCudaTest, ConversionsRoundTrip) {
  const std::vector<float> x = Random(4097, 9, 100.0f);
  DeviceBuffer dx = Put(x);
  DeviceBuffer d16 = Zeros<Bf16>(4097);
  DeviceBuffer dback = Zeros<float>(4097);
  ASSERT_OK(ConvertToBf16(*stream_, dx.span<float>(), d16.span<Bf16>()));
  ASSERT_TRUE(
      ConvertToF32(*stream_, d16.span<Bf16>(), dback.span<float>()).ok());
  EXPECT_EQ(Get<float>(dback), RoundBf16(x));  // same rounding as the host
}

}  // namespace
}  // namespace twice::kernels::cuda
