// Linear with bf16 / f16 / int8 weights against a float64 reference over
// the same rounded (or quantized) weights, and for bf16 and int8 the same
// rounded input (a bf16 product rounds x to bf16, lowp_dot.h; an int8
// product quantizes x per block, int8_dot.h), so the tolerance measures
// the kernels, not the rounding: f32 accumulation, 2e-5 + 2e-5 relative
// for k <= 1000 and inputs in [-1, 1] (as for f32 weights). A kernel that
// skipped the bf16 input's rounding would be off by about 1e-3. Each
// instruction set this CPU runs is checked directly, and the entry point
// over every way of splitting the work and every thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/bf16_amx_gemm.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/lowp_dot.h"
#include "kernels/i8_layout.h"
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
// int8 as value times its block's scale).
std::vector<double> Widened(const Tensor& w) {
  absl::StatusOr<Tensor> f = ConvertTensor(w, DType::kF32);
  EXPECT_OK(f);
  std::vector<double> out(f->span().begin(), f->span().end());
  if (w.dtype() == DType::kI8) {
    const auto* q = static_cast<const int8_t*>(w.raw_data());
    const int64_t k = w.dim(1);
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i) / k;
      const int64_t c = static_cast<int64_t>(i) % k;
      out[i] = static_cast<double>(q[I8ValueIndex(k, r, c)]) *
               double{w.scales()[I8ScaleIndex(k, r, c / kI8Block)]};
    }
  }
  return out;
}

// x as a product with a `dtype` matrix takes it (as doubles): rounded to
// bf16 for bf16; for int8 quantized to int16 per block of each row of
// length k by the rule of int8_dot.h (scale = largest magnitude / 32767,
// values rounded to nearest even after multiplying by the scale's f32
// inverse).
std::vector<double> InputAsTaken(const std::vector<float>& x, int64_t k,
                                 DType dtype) {
  std::vector<double> out(x.begin(), x.end());
  if (dtype == DType::kBF16) {
    for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16ToF32(F32ToBf16(x[i]));
  }
  if (dtype == DType::kI8) {
    for (size_t row = 0; row < x.size(); row += k) {
      for (int64_t b = 0; b < k; b += kI8Block) {
        const int64_t end = std::min(k, b + kI8Block);
        float max_abs = 0.0f;
        for (int64_t j = b; j < end; ++j) {
          max_abs = std::max(max_abs, std::fabs(x[row + j]));
        }
        const float scale = max_abs / 32767.0f;
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (int64_t j = b; j < end; ++j) {
          out[row + j] = std::nearbyint(x[row + j] * inv) * double{scale};
        }
      }
    }
  }
  return out;
}

std::vector<double> Reference(const std::vector<float>& x_in, int64_t m,
                              int64_t k, const std::vector<double>& w,
                              int64_t n, const std::vector<float>& bias,
                              DType dtype) {
  const std::vector<double> x = InputAsTaken(x_in, k, dtype);
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < n; ++o) {
      double acc = bias.empty() ? 0.0 : bias[o];
      for (int64_t j = 0; j < k; ++j) acc += x[i * k + j] * w[o * k + j];
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
// multiple of 8, 16, 32 or int8's block of 64).
TEST(LowpDotTest, EveryIsaMatchesReference) {
  for (cpu::Isa isa : IsasOfThisCpu()) {
    SCOPED_TRACE(std::string(cpu::IsaName(isa)));
    for (DType dtype : kLowpTypes) {
      SCOPED_TRACE(std::string(DTypeName(dtype)));
      for (auto [k, n] :
           {std::tuple{1, 1}, std::tuple{7, 5}, std::tuple{16, 4},
            std::tuple{33, 9}, std::tuple{64, 13}, std::tuple{100, 8},
            std::tuple{128, 6}, std::tuple{1000, 3}, std::tuple{1031, 7}}) {
        const auto w = RandomVector(n * k, 11);
        const auto x = RandomVector(k, 12);
        const auto bias = RandomVector(n, 13);
        const Tensor wq = Rounded(w, n, k, dtype);
        const cpu::LowpRows rows = cpu::LowpRowsOf(wq);
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

// A bf16 GEMM kernel (bf16_gemm.h, bf16_amx_gemm.h) on its own, on shapes
// that leave every kind of tail: rows of x not a multiple of its tile (8
// for the vdpbf16ps kernel, blocks of 32 in two tiles of 16 for AMX), rows
// of W not a multiple of the panel of 32, odd k (a pair of columns half
// empty) and k past one tile step of 32 columns, and ranges of W that
// start and end inside panels; rows outside the range stay untouched.
using GemmRows = void (*)(const uint16_t*, const cpu::Bf16Inputs&, const float*,
                          int64_t, int64_t, float*, int64_t);

// k_multiple: only shapes whose k is a multiple of it (32 for the tile
// kernel that reads W's rows as whole tile rows).
void ExpectGemmRowsMatchReference(GemmRows gemm_rows, int64_t row_multiple,
                                  int64_t k_multiple = 1) {
  for (auto [m, k, n] :
       {std::tuple{1, 1, 1}, std::tuple{7, 333, 31}, std::tuple{8, 64, 32},
        std::tuple{9, 65, 33}, std::tuple{17, 2, 70}, std::tuple{65, 768, 100},
        std::tuple{130, 31, 64}, std::tuple{32, 96, 32},
        std::tuple{33, 1001, 97}, std::tuple{1, 32, 17}, std::tuple{16, 64, 15},
        std::tuple{50, 128, 49}}) {
    if (k % k_multiple != 0) continue;
    SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n);
    const auto x = RandomVector(m * k, 21);
    const auto bias = RandomVector(n, 22);
    const Tensor wq = Rounded(RandomVector(n * k, 23), n, k, DType::kBF16);
    cpu::Bf16Inputs inputs;
    inputs.Pack(x.data(), m, k, row_multiple);
    const int64_t r0 = n > 4 ? 3 : 0;
    const int64_t r1 = n > 4 ? n - 1 : n;
    std::vector<float> y(m * n, 99.0f);
    gemm_rows(static_cast<const uint16_t*>(wq.raw_data()), inputs, bias.data(),
              r0, r1, y.data(), n);
    const std::vector<double> want =
        Reference(x, m, k, Widened(wq), n, bias, DType::kBF16);
    // k = 1001: sums of 1001 products, twice the tolerance of k <= 1000.
    const double tolerance = k > 1000 ? 4e-5 : 2e-5;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < n; ++r) {
        const float got = y[i * n + r];
        if (r < r0 || r >= r1) {
          ASSERT_EQ(got, 99.0f) << "row " << i << " column " << r;
          continue;
        }
        const double ref = want[i * n + r];
        ASSERT_NEAR(got, ref, tolerance + tolerance * std::abs(ref))
            << "row " << i << " column " << r;
      }
    }
  }
}

TEST(LowpDotTest, Bf16GemmMatchesReferenceOnEveryTail) {
  if (cpu::CpuIsa() != cpu::Isa::kAvx512Bf16) {
    GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  }
  ExpectGemmRowsMatchReference(&cpu::Bf16GemmRows, 1);
}

TEST(LowpDotTest, AmxBf16GemmMatchesReferenceOnEveryTail) {
  if (!cpu::AmxBf16Usable()) {
    GTEST_SKIP() << "this CPU or kernel gives this process no AMX-BF16 tiles";
  }
  ExpectGemmRowsMatchReference(&cpu::AmxBf16GemmRows, cpu::kAmxInputRows);
}

// W's rows as the tiles' first operand, x in blocks of 16 rows as the
// second: groups of W past its end (n not a multiple of 16) read a padded
// copy, ranges start anywhere. The helper's y has ldy = n.
TEST(LowpDotTest, AmxBf16DotRowsMatchReferenceOnEveryTail) {
  if (!cpu::AmxBf16Usable()) {
    GTEST_SKIP() << "this CPU or kernel gives this process no AMX-BF16 tiles";
  }
  ExpectGemmRowsMatchReference(
      [](const uint16_t* w, const cpu::Bf16Inputs& x, const float* bias,
         int64_t r0, int64_t r1, float* y, int64_t ldy) {
        cpu::Bf16TileInputs tiles;
        tiles.Pack(x);
        cpu::AmxBf16DotRows(w, /*n=*/ldy, tiles, bias, r0, r1, y, ldy);
      },
      1, 32);
}

// Prefill-sized products of a bf16 W run on AMX tiles where the CPU has
// them: through the entry point, on a pool thread and the caller, with the
// tiles allowed and not, both against the reference; the two kernels sum
// in different orders, so where the tiles run the results differ in their
// last bits, which shows the tile path ran.
TEST(LowpLinearTest, PrefillRowsOfBf16RunOnTheTilesWhereThereAreSome) {
  if (!cpu::AmxBf16Usable()) {
    GTEST_SKIP() << "this CPU or kernel gives this process no AMX-BF16 tiles";
  }
  const int64_t m = 200, k = 768, n = 300;
  const auto x = RandomVector(m * k, 31);
  const auto bias = RandomVector(n, 32);
  const Tensor wq = Rounded(RandomVector(n * k, 33), n, k, DType::kBF16);
  const std::vector<double> want =
      Reference(x, m, k, Widened(wq), n, bias, DType::kBF16);
  std::vector<float> tiles(m * n), vectors(m * n);
  ASSERT_OK(Linear(x, m, k, wq, n, bias, absl::MakeSpan(tiles)));
  cpu::SetAmxAllowed(false);
  const absl::Status status =
      Linear(x, m, k, wq, n, bias, absl::MakeSpan(vectors));
  cpu::SetAmxAllowed(true);
  ASSERT_OK(status);
  ExpectClose(tiles, want, 2e-5, 2e-5);
  ExpectClose(vectors, want, 2e-5, 2e-5);
  EXPECT_NE(tiles, vectors);
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

// One row (the GEMV) and many rows (the panels: more than 64 rows for
// int8) of a bf16 or int8 Linear compute the same products of the same
// rounded inputs: row i of a batch equals that row alone up to the order
// of f32 sums, so a step and a prefill agree.
TEST(LowpLinearTest, OneRowEqualsItsRowInABatch) {
  const int64_t m = 70, k = 333, n = 700;
  const auto x = RandomVector(m * k, 31);
  for (DType dtype : {DType::kBF16, DType::kI8}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    const Tensor wq = Rounded(RandomVector(n * k, 32), n, k, dtype);
    std::vector<float> batch(m * n);
    ASSERT_OK(Linear(x, m, k, wq, n, {}, absl::MakeSpan(batch)));
    for (int64_t i : {int64_t{0}, int64_t{7}, m - 1}) {
      std::vector<float> row(n);
      ASSERT_OK(Linear(absl::MakeConstSpan(x).subspan(i * k, k), 1, k, wq, n,
                       {}, absl::MakeSpan(row)));
      const std::vector<double> want(batch.begin() + i * n,
                                     batch.begin() + (i + 1) * n);
      ExpectClose(row, want, 2e-5, 2e-5, "row " + std::to_string(i));
    }
  }
}

// Rows of x times int8 weights are integer products like one row's, and
// up to 64 with bf16 weights (AVX-512 BF16) each load of W serves two rows of
// x in the one-row kernel's order: each row of a batch is bit for bit that
// row alone, through Linear (the pool's split included) and through each
// build's batched product.
TEST(LowpLinearTest, BatchRowsEqualEachRowAloneExactly) {
  const int64_t k = 333, n = 700;
  const auto bias = RandomVector(n, 62);
  for (DType dtype : {DType::kI8, DType::kBF16}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    const Tensor wq = Rounded(RandomVector(n * k, 61), n, k, dtype);
    // Linear's batch path for bf16 needs the vdpbf16ps build; elsewhere a
    // bf16 batch goes through the f32 panels (OneRowEqualsItsRowInABatch).
    const bool exact_linear =
        dtype == DType::kI8 || cpu::CpuIsa() == cpu::Isa::kAvx512Bf16;
    // int8 takes any number of rows this way; 900 rows of k = 333 are
    // three tiles of x.
    std::vector<int64_t> batch_rows = {2, 3, 5, 16, 64};
    if (dtype == DType::kI8) batch_rows.push_back(900);
    for (int64_t m : batch_rows) {
      SCOPED_TRACE(::testing::Message() << "m " << m);
      const auto x = RandomVector(m * k, 63 + m);
      if (exact_linear) {
        std::vector<float> batch(m * n);
        ASSERT_OK(Linear(x, m, k, wq, n, bias, absl::MakeSpan(batch)));
        for (int64_t i = 0; i < m; ++i) {
          std::vector<float> row(n);
          ASSERT_OK(Linear(absl::MakeConstSpan(x).subspan(i * k, k), 1, k, wq,
                           n, bias, absl::MakeSpan(row)));
          for (int64_t r = 0; r < n; ++r) {
            ASSERT_EQ(batch[i * n + r], row[r])
                << "input " << i << " row " << r;
          }
        }
      }
      for (cpu::Isa isa : IsasOfThisCpu()) {
        SCOPED_TRACE(std::string(cpu::IsaName(isa)));
        // Rows 5 .. n - 3: ranges that start and end inside groups.
        std::vector<float> y(m * n, 99.0f);
        cpu::LowpGemmRows(isa, cpu::LowpRowsOf(wq), x.data(), m, bias.data(), 5,
                          n - 3, y.data(), n);
        for (int64_t i = 0; i < m; ++i) {
          std::vector<float> alone(n, 99.0f);
          cpu::LowpGemvRows(isa, cpu::LowpRowsOf(wq), x.data() + i * k,
                            bias.data(), 5, n - 3, alone.data());
          for (int64_t r = 0; r < n; ++r) {
            ASSERT_EQ(y[i * n + r], alone[r]) << "input " << i << " row " << r;
          }
        }
      }
    }
  }
  // The int8 builds' batched product directly.
  const Tensor wq = Rounded(RandomVector(n * k, 61), n, k, DType::kI8);
  const cpu::Int8Rows rows{static_cast<const int8_t*>(wq.raw_data()),
                           wq.scales(), k};
  const int64_t m = 7;
  const auto x = RandomVector(m * k, 71);
  std::vector<cpu::QuantizedInput> inputs(m);
  for (int64_t i = 0; i < m; ++i) {
    cpu::QuantizeInput(x.data() + i * k, k, inputs[i]);
  }
  for (cpu::Int8Build build : cpu::Int8BuildsOfThisCpu()) {
    SCOPED_TRACE(cpu::Int8BuildName(build));
    std::vector<float> y(m * n, 99.0f);
    cpu::Int8GemmRows(build, rows, inputs.data(), m, bias.data(), 5, n - 3,
                      y.data(), n);
    for (int64_t i = 0; i < m; ++i) {
      std::vector<float> alone(n, 99.0f);
      cpu::Int8GemvRows(build, rows, inputs[i], bias.data(), 5, n - 3,
                        alone.data());
      for (int64_t r = 0; r < n; ++r) {
        ASSERT_EQ(y[i * n + r], alone[r]) << "input " << i << " row " << r;
      }
    }
  }
}

// Each int8 build this CPU runs (the entry points above take the best one
// for an Isa), on every kind of tail, with and without bias.
TEST(LowpDotTest, EveryInt8BuildMatchesReference) {
  for (cpu::Int8Build build : cpu::Int8BuildsOfThisCpu()) {
    SCOPED_TRACE(cpu::Int8BuildName(build));
    for (auto [k, n] :
         {std::tuple{1, 1}, std::tuple{31, 5}, std::tuple{64, 4},
          std::tuple{65, 9}, std::tuple{96, 7}, std::tuple{200, 13},
          std::tuple{1000, 6}, std::tuple{130, 16}, std::tuple{77, 37},
          std::tuple{768, 50}}) {
      SCOPED_TRACE(::testing::Message() << k << "x" << n);
      const auto w = RandomVector(n * k, 51);
      auto x = RandomVector(k, 52);
      x[k / 2] = 8.0f;  // an outlier sets the step of its own block only
      const auto bias = RandomVector(n, 53);
      const Tensor wq = Rounded(w, n, k, DType::kI8);
      cpu::QuantizedInput input;
      cpu::QuantizeInput(x.data(), k, input);
      const cpu::Int8Rows rows{static_cast<const int8_t*>(wq.raw_data()),
                               wq.scales(), k};
      for (bool with_bias : {false, true}) {
        std::vector<float> y(n, 99.0f);
        cpu::Int8GemvRows(build, rows, input, with_bias ? bias.data() : nullptr,
                          0, n, y.data());
        ExpectClose(
            y,
            Reference(x, 1, k, Widened(wq), n,
                      with_bias ? bias : std::vector<float>{}, DType::kI8),
            2e-5, 2e-5);
      }
      // A range of rows that starts and ends inside groups of 16 writes
      // those rows and no others.
      if (n > 2) {
        const int64_t r0 = 1, r1 = n - 1;
        std::vector<float> y(n, 99.0f);
        cpu::Int8GemvRows(build, rows, input, nullptr, r0, r1, y.data());
        const std::vector<double> want =
            Reference(x, 1, k, Widened(wq), n, {}, DType::kI8);
        EXPECT_EQ(y[0], 99.0f);
        EXPECT_EQ(y[n - 1], 99.0f);
        ExpectClose(std::vector<float>(y.begin() + r0, y.begin() + r1),
                    std::vector<double>(want.begin() + r0, want.begin() + r1),
                    2e-5, 2e-5, "rows 1 .. n - 1");
      }
      // Widened to f32 (the panels of batched products): each element is
      // its value times its block's scale, one f32 multiply, for any range
      // of rows.
      const int64_t r0 = n / 3;
      std::vector<float> widened((n - r0) * k, 99.0f);
      cpu::Int8RowsToF32(build, rows, r0, n, widened.data());
      const I8Arrays row_major = UnpackI8Rows(rows.values, rows.scales, n, k);
      const int64_t blocks = I8BlocksPerRow(k);
      for (int64_t r = r0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          const float want = static_cast<float>(row_major.values[r * k + c]) *
                             row_major.scales[r * blocks + c / kI8Block];
          ASSERT_EQ(widened[(r - r0) * k + c], want)
              << "row " << r << " column " << c;
        }
      }
    }
  }
}

// An input element that is NaN or infinite makes the outputs that use its
// block NaN or infinite in every int8 build, as in an f32 product, instead
// of being quantized into a finite number.
TEST(LowpDotTest, Int8NonFiniteInputIsNotHidden) {
  const int64_t k = 2 * kI8Block + 5, n = 9;
  const Tensor wq = Rounded(RandomVector(n * k, 41), n, k, DType::kI8);
  for (cpu::Isa isa : IsasOfThisCpu()) {
    SCOPED_TRACE(std::string(cpu::IsaName(isa)));
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
      for (int64_t at : {int64_t{3}, kI8Block + 1, k - 1}) {
        std::vector<float> x = RandomVector(k, 42);
        x[at] = bad;
        std::vector<float> y(n, 0.0f);
        cpu::LowpGemvRows(isa, cpu::LowpRowsOf(wq), x.data(), nullptr, 0, n,
                          y.data());
        for (int64_t r = 0; r < n; ++r) {
          EXPECT_FALSE(std::isfinite(y[r])) << "x[" << at << "] row " << r;
        }
      }
    }
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
