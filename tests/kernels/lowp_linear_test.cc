// Linear with bf16 / f16 / int8 weights against a float64 reference over
// the same rounded (or quantized) weights, and for bf16 the same rounded
// input (a bf16 product rounds x to bf16, lowp_dot.h), so the tolerance
// measures the kernels, not the rounding: f32 accumulation, 2e-5 + 2e-5
// relative for k <= 1000 and inputs in [-1, 1] (as for f32 weights). A
// kernel that skipped the input's rounding would be off by about 1e-3. Each
// instruction set this CPU runs is checked directly, and the entry point over
// every way of splitting the work and every thread count.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/lowp_dot.h"
#include "kernels/linear.h"
#include "kernels/tensor_convert.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

constexpr DType kLowpTypes[] = {DType::kBF16, DType::kF16, DType::kI8};

Tensor Rounded(const std::vector<float>& w, int64_t n, int64_t k, DType to) {
  absl::StatusOr<Tensor> t = ConvertTensor(Tensor::FromVector({n, k}, w), to);
  EXPECT_OK(t);
  return *t;
}

// W's elements as the kernels must see them, in float64 (widened exactly;
// int8 as value times row scale).
std::vector<double> Widened(const Tensor& w) {
  absl::StatusOr<Tensor> f = ConvertTensor(w, DType::kF32);
  EXPECT_OK(f);
  std::vector<double> out(f->span().begin(), f->span().end());
  if (w.dtype() == DType::kI8) {
    const auto* q = static_cast<const int8_t*>(w.raw_data());
    const int64_t k = w.dim(1);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<double>(q[i]) * double{w.scales()[i / k]};
    }
  }
  return out;
}

// x as a product with a `dtype` matrix takes it: rounded to bf16 for bf16.
std::vector<float> InputAsTaken(std::vector<float> x, DType dtype) {
  if (dtype != DType::kBF16) return x;
  for (float& v : x) v = Bf16ToF32(F32ToBf16(v));
  return x;
}

std::vector<double> Reference(std::vector<float> x, int64_t m, int64_t k,
                              const std::vector<double>& w, int64_t n,
                              const std::vector<float>& bias, DType dtype) {
  x = InputAsTaken(std::move(x), dtype);
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < n; ++o) {
      double acc = bias.empty() ? 0.0 : bias[o];
      for (int64_t j = 0; j < k; ++j)
        acc += double{x[i * k + j]} * w[o * k + j];
      y[i * n + o] = acc;
    }
  }
  return y;
}

std::vector<cpu::Isa> IsasOfThisCpu() {
  std::vector<cpu::Isa> isas = {cpu::Isa::kPortable};
  // Isa is ordered: a CPU runs every build up to the one CpuIsa() names.
  for (cpu::Isa isa :
       {cpu::Isa::kAvx2, cpu::Isa::kAvx512, cpu::Isa::kAvx512Bf16}) {
    if (cpu::CpuIsa() >= isa) isas.push_back(isa);
  }
  return isas;
}

// The GEMV and the widening of every build, on row counts and lengths
// that leave every kind of tail (rows not a multiple of 4, k not a
// multiple of 8, 16 or 32).
TEST(LowpDotTest, EveryIsaMatchesReference) {
  for (cpu::Isa isa : IsasOfThisCpu()) {
    SCOPED_TRACE(std::string(cpu::IsaName(isa)));
    for (DType dtype : kLowpTypes) {
      SCOPED_TRACE(std::string(DTypeName(dtype)));
      for (auto [k, n] : {std::tuple{1, 1}, std::tuple{7, 5}, std::tuple{16, 4},
                          std::tuple{33, 9}, std::tuple{64, 13},
                          std::tuple{100, 8}, std::tuple{1000, 3}}) {
        const auto w = RandomVector(n * k, 11);
        const auto x = RandomVector(k, 12);
        const auto bias = RandomVector(n, 13);
        const Tensor wq = Rounded(w, n, k, dtype);
        const cpu::LowpRows rows{dtype, wq.raw_data(), wq.scales(), k};
        std::vector<float> y(n, 99.0f);
        cpu::LowpGemvRows(isa, rows, x.data(), bias.data(), 0, n, y.data());
        const std::vector<double> wide = Widened(wq);
        ExpectClose(y, Reference(x, 1, k, wide, n, bias, dtype), 2e-5, 2e-5,
                    "gemv");
        std::vector<float> f32(n * k, 99.0f);
        cpu::LowpRowsToF32(isa, rows, 0, n, f32.data());
        ExpectClose(f32, wide, 1e-7, 1e-7, "widen");
      }
    }
  }
}

// Through the entry point: the GEMV (m = 1), the panel path with our
// small-m kernel (m = 2..16) and with SGEMM (m > 16), split by rows of W
// (wide n) and by rows of x (narrow n, large m), serial and threaded.
TEST(LowpLinearTest, EverySplitMatchesReference) {
  testing::ForEachThreadCount([](int) {
    for (DType dtype : kLowpTypes) {
      SCOPED_TRACE(std::string(DTypeName(dtype)));
      for (auto [m, k, n] : {std::tuple{1, 64, 48}, std::tuple{1, 1000, 203},
                             std::tuple{1, 100, 1000}, std::tuple{2, 100, 1000},
                             std::tuple{5, 333, 203}, std::tuple{16, 200, 600},
                             std::tuple{17, 200, 600}, std::tuple{40, 64, 520},
                             std::tuple{300, 64, 50}, std::tuple{129, 96, 257},
                             std::tuple{3, 1, 1}, std::tuple{20, 7, 5}}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n);
        for (bool with_bias : {false, true}) {
          const auto x = RandomVector(m * k, 1);
          const auto w = RandomVector(n * k, 2);
          const auto b = with_bias ? RandomVector(n, 3) : std::vector<float>{};
          const Tensor wq = Rounded(w, n, k, dtype);
          std::vector<float> y(m * n, 123.0f);
          ASSERT_OK(Linear(x, m, k, wq, n, b, absl::MakeSpan(y)));
          ExpectClose(y, Reference(x, m, k, Widened(wq), n, b, dtype), 2e-5,
                      2e-5);
        }
      }
    }
  });
}

// Rounding to bf16 ties to even and keeps NaN and infinity, as the
// checkpoint conversion F32ToBf16 does.
TEST(LowpDotTest, RoundToBf16MatchesTheConversion) {
  std::vector<float> x = RandomVector(1000, 21);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(1.0f + 1.0f / 256.0f);  // halfway: ties to even (1.0)
  x.push_back(1.0f + 3.0f / 256.0f);  // halfway: ties to even (1 + 1/64)
  std::vector<float> got(x.size());
  cpu::RoundToBf16(x.data(), static_cast<int64_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = Bf16ToF32(F32ToBf16(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(got[i], want) << i << ": " << x[i];
    }
  }
  EXPECT_EQ(got[got.size() - 2], 1.0f);
  EXPECT_EQ(got[got.size() - 1], 1.0f + 1.0f / 64.0f);
}

// One row (the GEMV) and many rows (the panels) of a bf16 Linear compute
// the same exact products: row i of a batch equals that row alone up to
// the order of f32 sums, so a step and a prefill agree.
TEST(LowpLinearTest, Bf16OneRowEqualsItsRowInABatch) {
  const int64_t m = 24, k = 333, n = 700;
  const auto x = RandomVector(m * k, 31);
  const Tensor wq = Rounded(RandomVector(n * k, 32), n, k, DType::kBF16);
  std::vector<float> batch(m * n);
  ASSERT_OK(Linear(x, m, k, wq, n, {}, absl::MakeSpan(batch)));
  for (int64_t i : {int64_t{0}, int64_t{7}, m - 1}) {
    std::vector<float> row(n);
    ASSERT_OK(Linear(absl::MakeConstSpan(x).subspan(i * k, k), 1, k, wq, n, {},
                     absl::MakeSpan(row)));
    const std::vector<double> want(batch.begin() + i * n,
                                   batch.begin() + (i + 1) * n);
    ExpectClose(row, want, 2e-5, 2e-5, "row " + std::to_string(i));
  }
}

TEST(LowpLinearTest, WrongShapeIsInvalidArgument) {
  const Tensor w = Rounded(RandomVector(6 * 4, 1), 6, 4, DType::kBF16);
  std::vector<float> x(4), y(5);
  const absl::Status s = Linear(x, 1, 4, w, 5, {}, absl::MakeSpan(y));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[6, 4]"), std::string::npos) << s;
}

TEST(LowpLinearTest, TensorOnAnotherDeviceIsUnimplementedNotCopied) {
  std::vector<uint16_t> storage(8 * 4);
  const Tensor w =
      Tensor::ViewOf(DType::kBF16, storage.data(), {8, 4}, Device::kCuda);
  std::vector<float> x(4), y(8);
  const absl::Status s = Linear(x, 1, 4, w, 8, {}, absl::MakeSpan(y));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("Linear"), std::string::npos) << s;
  EXPECT_NE(s.message().find("BF16"), std::string::npos) << s;
  EXPECT_NE(s.message().find("cuda"), std::string::npos) << s;
}

}  // namespace
}  // namespace twice::kernels
