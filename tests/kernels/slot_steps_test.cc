// The slot-indexed decode steps (kernels/slot_steps.h). Conv and SSD
// against the single-sequence operations they batch (causal_conv1d,
// SsdStep, each checked against float64 references in
// sequence_kernels_test.cc and ssd_chunk_scan_test.cc): row r must give
// exactly what the single op gives on slot slots[r]'s state. The Based
// steps (linear attention with the Taylor map, sliding-window attention
// with its ring and RoPE) against float64 references written here, over
// several steps so each reads what the last one wrote. Everywhere: slots
// not in the batch stay untouched, bad inputs are refused before any
// state is written.
//
// Seeds: fixed by default, TWICE_KERNEL_TEST_SEED picks another; the seed
// is printed.
#include "kernels/slot_steps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/causal_conv1d.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/taylor_feature_map.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels {
namespace {

using testing::ExpectClose;
using testing::RandomVector;

uint32_t SlotStepSeed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("TWICE_KERNEL_TEST_SEED");
    const uint32_t s =
        env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                       : 20240611u;
    std::printf("TWICE_KERNEL_TEST_SEED=%u\n", s);
    return s;
  }();
  return seed;
}

std::vector<float> SlotRandom(size_t n, uint32_t salt, float scale = 1.0f) {
  return RandomVector(n, SlotStepSeed() * 2654435761u + salt, scale);
}

std::vector<double> ToDoubles(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// ---- float64 references ----------------------------------------------------

// kernels/taylor_feature_map.h for one vector x of width f.
std::vector<double> RefTaylorFeatures(const float* x, int64_t f) {
  std::vector<double> out(TaylorFeatureDim(f));
  const double rd = std::pow(static_cast<double>(f), 0.25);
  const double rrd = std::sqrt(2.0) * std::sqrt(static_cast<double>(f));
  out[0] = 1.0;
  for (int64_t m = 0; m < f; ++m) out[1 + m] = x[m] / rd;
  for (int64_t m = 0; m < f; ++m) {
    for (int64_t n = 0; n < f; ++n) {
      out[1 + f + m * f + n] = double{x[m]} * x[n] / rrd;
    }
  }
  return out;
}

// One Based step of one sequence (kernels/linear_attention.h with the
// feature map in front): q, k [H, F]; v, y [H, hd]; kv [H, hd, D], z [H, D].
void RefLinearAttentionStep(const float* q, const float* k, const float* v,
                            const LinearAttentionStepDims& dims, double eps,
                            double* kv, double* z, double* y) {
  const int64_t f = dims.feature_dim, d = TaylorFeatureDim(f);
  const int64_t hd = dims.head_dim;
  for (int64_t h = 0; h < dims.heads; ++h) {
    const std::vector<double> pq = RefTaylorFeatures(q + h * f, f);
    const std::vector<double> pk = RefTaylorFeatures(k + h * f, f);
    double den = 0.0;
    for (int64_t m = 0; m < d; ++m) {
      z[h * d + m] += pk[m];
      den += pq[m] * z[h * d + m];
    }
    for (int64_t e = 0; e < hd; ++e) {
      double* se = kv + (h * hd + e) * d;
      double num = 0.0;
      for (int64_t m = 0; m < d; ++m) {
        se[m] += double{v[h * hd + e]} * pk[m];
        num += pq[m] * se[m];
      }
      y[h * hd + e] = num / (den + eps);
    }
  }
}

// kernels/rope.h rotate-half on one [H, hd] row at position p.
void RefRotate(double* x, int64_t heads, int64_t hd, int64_t p, double base) {
  const int64_t half = hd / 2;
  for (int64_t h = 0; h < heads; ++h) {
    double* x1 = x + h * hd;
    double* x2 = x1 + half;
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) * std::pow(base, -2.0 * i / hd);
      const double a = x1[i], b = x2[i];
      x1[i] = a * std::cos(angle) - b * std::sin(angle);
      x2[i] = b * std::cos(angle) + a * std::sin(angle);
    }
  }
}

// One sliding-window step of one sequence at position p on its ring
// ([L, H, hd] keys and values): y [H, hd].
void RefWindowStep(const float* qkv_row, const WindowStepDims& dims,
                   double base, double scale, int64_t p, double* ring_k,
                   double* ring_v, double* y) {
  const int64_t h = dims.heads, hd = dims.head_dim, len = dims.window;
  const int64_t width = h * hd;
  std::vector<double> q(qkv_row, qkv_row + width);
  std::vector<double> k(qkv_row + width, qkv_row + 2 * width);
  const std::vector<double> v(qkv_row + 2 * width, qkv_row + 3 * width);
  RefRotate(q.data(), h, hd, p, base);
  RefRotate(k.data(), h, hd, p, base);
  const int64_t first = std::max<int64_t>(0, p - len);
  for (int64_t head = 0; head < h; ++head) {
    const int64_t off = head * hd;
    // Keys of positions first .. p-1 from the ring, then the token's own.
    std::vector<const double*> keys, values;
    for (int64_t pos = first; pos < p; ++pos) {
      keys.push_back(ring_k + (pos % len) * width + off);
      values.push_back(ring_v + (pos % len) * width + off);
    }
    keys.push_back(k.data() + off);
    values.push_back(v.data() + off);
    std::vector<double> s(keys.size());
    double mx = -INFINITY;
    for (size_t j = 0; j < keys.size(); ++j) {
      double dot = 0.0;
      for (int64_t e = 0; e < hd; ++e) dot += q[off + e] * keys[j][e];
      s[j] = scale * dot;
      mx = std::max(mx, s[j]);
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t e = 0; e < hd; ++e) {
      double acc = 0.0;
      for (size_t j = 0; j < keys.size(); ++j) acc += s[j] * values[j][e];
      y[off + e] = acc / sum;
    }
  }
  std::copy(k.begin(), k.end(), ring_k + (p % len) * width);
  std::copy(v.begin(), v.end(), ring_v + (p % len) * width);
}

TEST(SlotStepsTest, ConvStepPerRowEqualsTheSingleSequenceStep) {
  const int64_t channels = 37, stride = 50, k = 4, capacity = 7;
  const std::vector<int32_t> slots = {5, 0, 3, 6};
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t per_slot = (k - 1) * channels;
  const std::vector<float> x = RandomVector(rows * stride, 1);
  const std::vector<float> w = RandomVector(channels * k, 2);
  std::vector<float> tails = RandomVector(capacity * per_slot, 3);
  std::vector<float> want_tails = tails;
  std::vector<float> out(rows * channels), want(rows * channels);
  ASSERT_OK(CausalConv1dStepSlots(x, channels, stride, w, k,
                                  absl::MakeSpan(tails), slots,
                                  absl::MakeSpan(out)));
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_OK(CausalConv1d(
        absl::MakeConstSpan(x).subspan(r * stride, channels), 1, channels,
        stride, w, k,
        absl::MakeSpan(want_tails).subspan(slots[r] * per_slot, per_slot),
        absl::MakeSpan(want).subspan(r * channels, channels)));
  }
  EXPECT_EQ(out, want);
  EXPECT_EQ(tails, want_tails);  // slots 1, 2, 4 untouched in both
}

TEST(SlotStepsTest, SsdStepPerRowEqualsTheSingleSequenceStep) {
  const SsdShape shape{6, 8, 2, 12};
  const int64_t hp = 48, gn = 24, stride = hp + 2 * gn + 3, capacity = 5;
  const std::vector<int32_t> slots = {4, 1, 2};
  const int64_t rows = static_cast<int64_t>(slots.size());
  const int64_t per_slot = hp * shape.state;
  const std::vector<float> xbc = RandomVector(rows * stride, 4);
  std::vector<float> dt = RandomVector(rows * shape.heads, 5, 0.5f);
  for (float& v : dt) v = std::abs(v);
  std::vector<float> a = RandomVector(shape.heads, 6, 2.0f);
  for (float& v : a) v = -std::abs(v);
  const std::vector<float> d = RandomVector(shape.heads, 7);
  std::vector<float> states = RandomVector(capacity * per_slot, 8);
  std::vector<float> want_states = states;
  std::vector<float> y(rows * hp), want(rows * hp);
  const absl::Span<const float> all = xbc;
  ASSERT_OK(SsdStepSlots(shape, all, stride, all.subspan(hp),
                         all.subspan(hp + gn), stride, dt, a, d,
                         absl::MakeSpan(states), slots, absl::MakeSpan(y)));
  for (int64_t r = 0; r < rows; ++r) {
    const absl::Span<const float> row = all.subspan(r * stride, stride);
    ASSERT_OK(SsdStep(
        shape, row.subspan(0, hp), row.subspan(hp, gn),
        row.subspan(hp + gn, gn),
        absl::MakeConstSpan(dt).subspan(r * shape.heads, shape.heads), a, d,
        absl::MakeSpan(want_states).subspan(slots[r] * per_slot, per_slot),
        absl::MakeSpan(want).subspan(r * hp, hp)));
  }
  EXPECT_EQ(y, want);
  EXPECT_EQ(states, want_states);
}

TEST(SlotStepsTest, BadSlotMapsAreRefused) {
  const int64_t channels = 8, k = 3, capacity = 3;
  const std::vector<float> x(2 * channels), w(channels * k);
  std::vector<float> tails(capacity * (k - 1) * channels);
  std::vector<float> out(2 * channels);
  for (const std::vector<int32_t>& slots :
       {std::vector<int32_t>{1, 1}, std::vector<int32_t>{0, 3},
        std::vector<int32_t>{-1, 0}}) {
    EXPECT_EQ(
        CausalConv1dStepSlots(x, channels, channels, w, k,
                              absl::MakeSpan(tails), slots, absl::MakeSpan(out))
            .code(),
        absl::StatusCode::kInvalidArgument);
  }
  // A state array that is not a whole number of slots.
  std::vector<float> ragged(tails.size() + 1);
  EXPECT_EQ(
      CausalConv1dStepSlots(x, channels, channels, w, k, absl::MakeSpan(ragged),
                            std::vector<int32_t>{0, 1}, absl::MakeSpan(out))
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// Whether slot `slot` (`per_slot` values) of a and b is bit for bit equal.
bool SameSlot(const std::vector<float>& a, const std::vector<float>& b,
              int64_t slot, int64_t per_slot) {
  return std::equal(a.begin() + slot * per_slot,
                    a.begin() + (slot + 1) * per_slot,
                    b.begin() + slot * per_slot);
}

// States of `capacity` slots as after `prior` random tokens each (a random
// z could put phi_q · z + eps near zero; a sum of Taylor features keeps it
// >= 1/2 per token), rounded to float; the reference continues from the
// rounded values.
void CarriedBasedStates(const LinearAttentionStepDims& dims, int64_t capacity,
                        int64_t prior, uint32_t salt, std::vector<float>& kv,
                        std::vector<float>& z) {
  const int64_t h = dims.heads, hd = dims.head_dim, f = dims.feature_dim;
  const int64_t d = TaylorFeatureDim(f);
  std::vector<double> kv64(capacity * h * hd * d), z64(capacity * h * d);
  std::vector<double> y(h * hd);
  for (int64_t s = 0; s < capacity; ++s) {
    for (int64_t t = 0; t < prior; ++t) {
      const uint32_t at = salt + 3 * static_cast<uint32_t>(s * prior + t);
      const std::vector<float> q = SlotRandom(h * f, at);
      const std::vector<float> k = SlotRandom(h * f, at + 1);
      const std::vector<float> v = SlotRandom(h * hd, at + 2);
      RefLinearAttentionStep(q.data(), k.data(), v.data(), dims, 1e-6,
                             kv64.data() + s * h * hd * d,
                             z64.data() + s * h * d, y.data());
    }
  }
  kv.assign(kv64.begin(), kv64.end());
  z.assign(z64.begin(), z64.end());
}

TEST(SlotStepsTest, LinearAttentionStepMatchesFloat64Reference) {
  // Tiny, odd, and the 360M Based head shape (H 16, hd 64, F 16).
  for (const LinearAttentionStepDims dims :
       {LinearAttentionStepDims{3, 5, 2}, LinearAttentionStepDims{2, 7, 5},
        LinearAttentionStepDims{16, 64, 16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "seed " << SlotStepSeed() << " H " << dims.heads << " hd "
                 << dims.head_dim << " F " << dims.feature_dim);
    const int64_t h = dims.heads, hd = dims.head_dim, f = dims.feature_dim;
    const int64_t d = TaylorFeatureDim(f);
    const int64_t capacity = 6;
    const float eps = 1e-6f;
    std::vector<float> kv, z;
    CarriedBasedStates(dims, capacity, 3, 100, kv, z);
    std::vector<double> kv64 = ToDoubles(kv), z64 = ToDoubles(z);
    const std::vector<float> untouched_kv = kv, untouched_z = z;
    // Two steps, slots scrambled and differently ordered; slot 3 sits out.
    for (const std::vector<int32_t>& slots :
         {std::vector<int32_t>{5, 0, 2, 4}, std::vector<int32_t>{1, 4, 5}}) {
      const int64_t rows = static_cast<int64_t>(slots.size());
      const uint32_t salt = 200 + static_cast<uint32_t>(rows);
      const std::vector<float> q = SlotRandom(rows * h * f, salt);
      const std::vector<float> k = SlotRandom(rows * h * f, salt + 1);
      const std::vector<float> v = SlotRandom(rows * h * hd, salt + 2);
      std::vector<float> y(rows * h * hd, -7.0f);
      ASSERT_OK(LinearAttentionStepSlots(q, k, v, dims, eps, absl::MakeSpan(kv),
                                         absl::MakeSpan(z), slots,
                                         absl::MakeSpan(y)));
      std::vector<double> want(rows * h * hd);
      for (int64_t r = 0; r < rows; ++r) {
        RefLinearAttentionStep(
            q.data() + r * h * f, k.data() + r * h * f, v.data() + r * h * hd,
            dims, eps, kv64.data() + slots[r] * h * hd * d,
            z64.data() + slots[r] * h * d, want.data() + r * h * hd);
      }
      // Float sums over D <= 273 terms of a positive-denominator ratio.
      ExpectClose(y, want, 1e-5, 1e-4, "y");
      ExpectClose(kv, kv64, 1e-5, 1e-5, "kv_states");
      ExpectClose(z, z64, 1e-5, 1e-5, "k_states");
    }
    EXPECT_TRUE(SameSlot(kv, untouched_kv, 3, h * hd * d));
    EXPECT_TRUE(SameSlot(z, untouched_z, 3, h * d));
  }
}

TEST(SlotStepsTest, WindowAttentionStepMatchesFloat64Reference) {
  // Tiny heads and the 360M Based window shape (H 16, hd 64, L 64).
  struct SlotStepCase {
    WindowStepDims dims;
    std::vector<int32_t> slots;
    std::vector<int64_t> positions;
  };
  for (const SlotStepCase& c :
       {// p = 2 < L, p = L, p > L (wraps to ring row 1), p = 0, p = 2L - 1
        // (ring row L - 1); slot 3 sits out (and 3, 5 in the others).
        SlotStepCase{{2, 6, 4}, {4, 1, 5, 2, 0}, {2, 4, 9, 0, 7}},
        SlotStepCase{{3, 2, 1}, {1, 0}, {5, 0}},
        SlotStepCase{{16, 64, 64}, {2, 0, 4, 1}, {63, 64, 200, 5}}}) {
    const WindowStepDims& dims = c.dims;
    SCOPED_TRACE(::testing::Message()
                 << "seed " << SlotStepSeed() << " H " << dims.heads << " hd "
                 << dims.head_dim << " L " << dims.window);
    const int64_t width = dims.heads * dims.head_dim;
    const int64_t capacity = 6, stride = 3 * width + 5;
    const int64_t ring_size = capacity * dims.window * width;
    const double base = 10000.0;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
    // Random ring contents: a step reading a stale or wrong row differs.
    std::vector<float> ring_k = SlotRandom(ring_size, 300);
    std::vector<float> ring_v = SlotRandom(ring_size, 301);
    std::vector<double> ring_k64 = ToDoubles(ring_k);
    std::vector<double> ring_v64 = ToDoubles(ring_v);
    const std::vector<float> untouched_k = ring_k, untouched_v = ring_v;
    std::vector<int64_t> positions = c.positions;
    const int64_t rows = static_cast<int64_t>(c.slots.size());
    // Three steps in a row: later ones read what earlier ones wrote.
    for (int step = 0; step < 3; ++step) {
      std::vector<float> qkv = SlotRandom(rows * stride, 310 + step);
      const std::vector<float> qkv_before = qkv;
      std::vector<float> y(rows * width, -7.0f);
      ASSERT_OK(WindowAttentionStepSlots(
          qkv, stride, dims, static_cast<float>(base), scale, positions,
          absl::MakeSpan(ring_k), absl::MakeSpan(ring_v), c.slots,
          absl::MakeSpan(y)));
      EXPECT_EQ(qkv, qkv_before);
      std::vector<double> want(rows * width);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = c.slots[r] * dims.window * width;
        RefWindowStep(qkv.data() + r * stride, dims, base, scale, positions[r],
                      ring_k64.data() + off, ring_v64.data() + off,
                      want.data() + r * width);
      }
      // Float dot products of hd <= 64 terms and a float softmax.
      ExpectClose(y, want, 2e-6, 2e-5, "y");
      ExpectClose(ring_k, ring_k64, 1e-6, 1e-6, "ring_k");
      ExpectClose(ring_v, ring_v64, 0.0, 0.0, "ring_v");
      for (int64_t& p : positions) ++p;
    }
    for (int32_t s = 0; s < capacity; ++s) {
      if (std::find(c.slots.begin(), c.slots.end(), s) != c.slots.end()) {
        continue;
      }
      EXPECT_TRUE(SameSlot(ring_k, untouched_k, s, dims.window * width)) << s;
      EXPECT_TRUE(SameSlot(ring_v, untouched_v, s, dims.window * width)) << s;
    }
  }
}

TEST(SlotStepsTest, BadBasedStepInputsAreRefusedWithoutWriting) {
  const LinearAttentionStepDims la{2, 4, 3};
  const int64_t d = TaylorFeatureDim(la.feature_dim), capacity = 3;
  std::vector<float> kv = SlotRandom(capacity * 2 * 4 * d, 400);
  std::vector<float> z = SlotRandom(capacity * 2 * d, 401);
  const std::vector<float> kv0 = kv, z0 = z;
  const std::vector<float> q(2 * 2 * 3, 0.5f), v(2 * 2 * 4, 0.5f);
  std::vector<float> y(2 * 2 * 4);
  // Duplicate slot, slot out of range either way: row 0 is valid each time.
  for (const std::vector<int32_t>& slots :
       {std::vector<int32_t>{1, 1}, std::vector<int32_t>{0, 3},
        std::vector<int32_t>{2, -1}}) {
    EXPECT_EQ(
        LinearAttentionStepSlots(q, q, v, la, 1e-6f, absl::MakeSpan(kv),
                                 absl::MakeSpan(z), slots, absl::MakeSpan(y))
            .code(),
        absl::StatusCode::kInvalidArgument);
  }
  // Size mismatches: a short k, a k_states of the wrong capacity.
  EXPECT_EQ(
      LinearAttentionStepSlots(q, absl::MakeConstSpan(q).subspan(1), v, la,
                               1e-6f, absl::MakeSpan(kv), absl::MakeSpan(z),
                               std::vector<int32_t>{0, 1}, absl::MakeSpan(y))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      LinearAttentionStepSlots(q, q, v, la, 1e-6f, absl::MakeSpan(kv),
                               absl::MakeSpan(z).subspan(d),
                               std::vector<int32_t>{0, 1}, absl::MakeSpan(y))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv, kv0);
  EXPECT_EQ(z, z0);
  // The same call with good arguments goes through.
  EXPECT_OK(LinearAttentionStepSlots(
      q, q, v, la, 1e-6f, absl::MakeSpan(kv), absl::MakeSpan(z),
      std::vector<int32_t>{2, 0}, absl::MakeSpan(y)));

  const WindowStepDims wd{2, 4, 3};
  const int64_t width = 8, ring = capacity * 3 * width;
  std::vector<float> ring_k = SlotRandom(ring, 402);
  std::vector<float> ring_v = SlotRandom(ring, 403);
  const std::vector<float> ring_k0 = ring_k, ring_v0 = ring_v;
  const std::vector<float> qkv(2 * 3 * width, 0.5f);
  std::vector<float> wy(2 * width);
  auto window_step = [&](const std::vector<int32_t>& slots,
                         const std::vector<int64_t>& positions,
                         const WindowStepDims& dims, int64_t ring_v_size) {
    return WindowAttentionStepSlots(qkv, 3 * width, dims, 10000.0f, 0.5f,
                                    positions, absl::MakeSpan(ring_k),
                                    absl::MakeSpan(ring_v).first(ring_v_size),
                                    slots, absl::MakeSpan(wy))
        .code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(window_step({0, 0}, {1, 2}, wd, ring), kBad);      // duplicate
  EXPECT_EQ(window_step({1, 3}, {1, 2}, wd, ring), kBad);      // out of range
  EXPECT_EQ(window_step({1, 2}, {1, -1}, wd, ring), kBad);     // negative
  EXPECT_EQ(window_step({1, 2}, {1}, wd, ring), kBad);         // positions
  EXPECT_EQ(window_step({1, 2}, {1, 2}, wd, ring - 1), kBad);  // ring_v size
  EXPECT_EQ(window_step({1, 2}, {1, 2}, WindowStepDims{2, 3, 3}, ring),
            kBad);  // odd head_dim
  EXPECT_EQ(ring_k, ring_k0);
  EXPECT_EQ(ring_v, ring_v0);
  // The same call with good arguments goes through (the refusals above were
  // for the stated reasons).
  EXPECT_EQ(window_step({1, 2}, {1, 2}, wd, ring), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace twice::kernels
