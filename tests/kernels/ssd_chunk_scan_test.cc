// SsdChunkScan and SsdStep (kernels/ssd_chunk_scan.h) against a float64
// evaluation of the recurrence, at shapes that cover groups shared by
// several heads, strided inputs (columns of one xBC matrix), ragged last
// chunks, chunk 1, a chunk longer than the input, a chunk whose decays
// leave f32's normal range, a non-zero initial state and calls split
// mid-sequence. Tolerance: 1e-5 relative to the largest
// reference value.
#include "kernels/ssd_chunk_scan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace twice::kernels {
namespace {

struct SsdScanCase {
  SsdShape shape;
  int64_t tokens;
  int64_t chunk;
  float a = 0.0f;  // every head's A; 0: drawn per head in [-1, -0.05)
};

struct Inputs {
  std::vector<float> xbc;  // [T, H·P + 2·G·N] = x | B | C
  std::vector<float> dt, a, d, state;
  int64_t stride = 0;
};

Inputs Make(const SsdScanCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
  const SsdShape& s = c.shape;
  Inputs in;
  in.stride = s.heads * s.head_dim + 2 * s.groups * s.state;
  in.xbc.resize(c.tokens * in.stride);
  for (float& v : in.xbc) v = normal(rng);
  in.dt.resize(c.tokens * s.heads);
  for (float& v : in.dt) v = uniform(rng);
  in.a.resize(s.heads);
  for (float& v : in.a) v = c.a != 0.0f ? c.a : -uniform(rng);
  in.d.resize(s.heads);
  for (float& v : in.d) v = normal(rng);
  in.state.resize(s.heads * s.head_dim * s.state);
  for (float& v : in.state) v = normal(rng);
  return in;
}

// Float64 recurrence; returns y [T, H·P] and updates `state`.
std::vector<double> Reference(const SsdScanCase& c, const Inputs& in,
                              std::vector<double>& state) {
  const SsdShape& s = c.shape;
  const int64_t hp = s.heads * s.head_dim;
  const int64_t gn = s.groups * s.state;
  std::vector<double> y(c.tokens * hp);
  for (int64_t t = 0; t < c.tokens; ++t) {
    const float* row = in.xbc.data() + t * in.stride;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / (s.heads / s.groups);
      const double delta = in.dt[t * s.heads + h];
      const double decay = std::exp(delta * in.a[h]);
      for (int64_t p = 0; p < s.head_dim; ++p) {
        const double x = row[h * s.head_dim + p];
        double acc = 0.0;
        for (int64_t n = 0; n < s.state; ++n) {
          double& st = state[(h * s.head_dim + p) * s.state + n];
          st = decay * st + delta * x * row[hp + g * s.state + n];
          acc += st * row[hp + gn + g * s.state + n];
        }
        y[t * hp + h * s.head_dim + p] = acc + in.d[h] * x;
      }
    }
  }
  return y;
}

double Error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0.0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

class SsdChunkScanTest : public ::testing::TestWithParam<SsdScanCase> {};

TEST_P(SsdChunkScanTest, ChunkedAndStepMatchTheRecurrence) {
  const SsdScanCase c = GetParam();
  const SsdShape& s = c.shape;
  const Inputs in = Make(c, 17);
  const int64_t hp = s.heads * s.head_dim;
  const int64_t gn = s.groups * s.state;
  std::vector<double> want_state(in.state.begin(), in.state.end());
  const std::vector<double> want = Reference(c, in, want_state);
  const absl::Span<const float> xbc = in.xbc;

  // Chunked, split into two calls mid-sequence (state passing).
  std::vector<float> state = in.state;
  std::vector<float> y(c.tokens * hp);
  const int64_t first = c.tokens / 3;
  for (auto [begin, n] :
       {std::pair<int64_t, int64_t>{0, first}, {first, c.tokens - first}}) {
    const absl::Span<const float> part = xbc.subspan(begin * in.stride);
    ASSERT_TRUE(SsdChunkScan(s, n, c.chunk, part, in.stride, part.subspan(hp),
                             part.subspan(hp + gn), in.stride,
                             absl::MakeConstSpan(in.dt).subspan(begin * s.heads,
                                                                n * s.heads),
                             in.a, in.d, absl::MakeSpan(state),
                             absl::MakeSpan(y).subspan(begin * hp, n * hp))
                    .ok());
  }
  EXPECT_LE(Error(y, want), 1e-5);
  EXPECT_LE(Error(state, want_state), 1e-5);

  // Recurrent form, token by token.
  std::vector<float> step_state = in.state;
  std::vector<float> step_y(c.tokens * hp);
  for (int64_t t = 0; t < c.tokens; ++t) {
    const absl::Span<const float> row = xbc.subspan(t * in.stride, in.stride);
    ASSERT_TRUE(
        SsdStep(s, row.subspan(0, hp), row.subspan(hp, gn),
                row.subspan(hp + gn, gn),
                absl::MakeConstSpan(in.dt).subspan(t * s.heads, s.heads), in.a,
                in.d, absl::MakeSpan(step_state),
                absl::MakeSpan(step_y).subspan(t * hp, hp))
            .ok());
  }
  EXPECT_LE(Error(step_y, want), 1e-5);
  EXPECT_LE(Error(step_state, want_state), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SsdChunkScanTest,
    ::testing::Values(
        SsdScanCase{{4, 8, 2, 6}, 37, 8},     // ragged, shared groups
        SsdScanCase{{2, 3, 1, 5}, 12, 4},     // whole chunks
        SsdScanCase{{3, 4, 3, 2}, 9, 1},      // chunk 1
        SsdScanCase{{2, 16, 1, 32}, 20, 64},  // chunk > tokens
        SsdScanCase{{24, 8, 1, 16}, 70, 32},  // many heads (pool)
        SsdScanCase{{2, 4, 1, 37}, 15, 8},    // 16-lane rows and a tail
        // The model's chunk of 256 with A = -1: Δ averages 0.525, so the
        // decays within a chunk reach about e^-134, far below f32's normal
        // range (e^-87), where the kernels flush (flush_denormals.h).
        SsdScanCase{{2, 8, 1, 16}, 300, 256, -1.0f}));

TEST(SsdChunkScanArgsTest, RejectsBadShapes) {
  std::vector<float> buf(1024);
  const absl::Span<const float> in = buf;
  std::vector<float> out(1024);
  // groups must divide heads
  EXPECT_FALSE(SsdStep({3, 2, 2, 2}, in.subspan(0, 6), in.subspan(0, 4),
                       in.subspan(0, 4), in.subspan(0, 3), in.subspan(0, 3),
                       in.subspan(0, 3), absl::MakeSpan(out).subspan(0, 12),
                       absl::MakeSpan(out).subspan(0, 6))
                   .ok());
  // state of the wrong size
  EXPECT_FALSE(SsdChunkScan({2, 2, 1, 2}, 2, 4, in, 8, in, in, 8,
                            in.subspan(0, 4), in.subspan(0, 2),
                            in.subspan(0, 2), absl::MakeSpan(out).subspan(0, 7),
                            absl::MakeSpan(out).subspan(0, 8))
                   .ok());
  // zero tokens is a no-op
  std::vector<float> state(8, 1.0f);
  EXPECT_TRUE(SsdChunkScan({2, 2, 1, 2}, 0, 4, {}, 8, {}, {}, 8, {},
                           in.subspan(0, 2), in.subspan(0, 2),
                           absl::MakeSpan(state), {})
                  .ok());
  EXPECT_EQ(state, std::vector<float>(8, 1.0f));
}

}  // namespace
}  // namespace twice::kernels
