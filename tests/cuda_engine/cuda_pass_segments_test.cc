// The CUDA executor device's operations over the segments of a prefill
// pass of several sequences (CausalConv1dSegments, SsdChunkScanSegments,
// LinearAttentionSegments, WindowAttentionSegments: every segment in one
// launch, or three) against the CPU device's segment-by-segment forms, on
// fresh random inputs (seed printed by the test utilities): segments of 1
// to 63 rows in scattered slots of a pool, slots outside the pass left as
// they were, the convolution's tails, the SSD states, the linear-attention
// states (carried, as after a few tokens) and the window rings continued
// per slot. A pass with a segment of 64 rows or more runs the chunked form
// per segment instead, with the same results. The CUDA outputs start as
// NaN, so matching the CPU shows the device wrote them. Both devices
// refuse segments that overlap, share a slot or start before their
// sequence (cuda_pass_rows_test.cc has the row form's attention and RAT's
// scan). SKIPPED without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "kernels/pass_segments.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/taylor_feature_map.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda_engine/pass_devices_fixture.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using kernels::PassSegment;
using kernels::cuda::testing::kF32Tolerance;
using kernels::cuda::testing::Random;
using kernels::cuda::testing::RelativeError;
using pass_testing::kSlots;
using pass_testing::Pair;

class CudaPassSegmentsTest : public pass_testing::PassDevicesTest {
 protected:
  void ExpectConvMatches(const std::vector<int64_t>& lengths) {
    const int64_t channels = 37, stride = 50, k = 4;
    const int64_t rows = UploadPass(lengths);
    const Pair x = Put(Random(rows * stride, 1));
    const Pair w = Put(Random(channels * k, 2));
    const Pair tails = Put(Random(kSlots * (k - 1) * channels, 3));
    const Pair out = Put(std::vector<float>(rows * channels, 0.0f), true);
    const int64_t sent = cuda_->traffic().bytes_to_device;
    ASSERT_OK(cuda_->CausalConv1dSegments(
        x.cuda->floats().sub(0, (rows - 1) * stride + channels), channels,
        stride, w.cuda->floats(), k, tails.cuda->floats(), *cuda_segments_,
        out.cuda->floats()));
    ASSERT_OK(cpu_->CausalConv1dSegments(
        x.cpu->floats().sub(0, (rows - 1) * stride + channels), channels,
        stride, w.cpu->floats(), k, tails.cpu->floats(), *cpu_segments_,
        out.cpu->floats()));
    EXPECT_EQ(cuda_->traffic().bytes_to_device, sent) << "inputs moved";
    const auto [got, want] = Get(out);
    EXPECT_LE(RelativeError(got, want), kF32Tolerance);
    const auto [got_tails, want_tails] = Get(tails);
    EXPECT_EQ(got_tails, want_tails);  // copies of x's rows and old tails
  }

  void ExpectSsdMatches(const std::vector<int64_t>& lengths) {
    const kernels::SsdShape shape{/*heads=*/4, /*head_dim=*/6, /*groups=*/2,
                                  /*state=*/40};
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t gn = shape.groups * shape.state;
    const int64_t stride = hp + 2 * gn;  // x | B | C, as Mamba-2's conv out
    const int64_t rows = UploadPass(lengths);
    std::vector<float> a = Random(shape.heads, 10);
    for (float& v : a) v = -std::exp(v);
    std::vector<float> dt = Random(rows * shape.heads, 11);
    for (float& v : dt) v = std::log1p(std::exp(v)) * 0.2f;  // softplus
    const Pair xbc = Put(Random(rows * stride, 12));
    const Pair dts = Put(dt);
    const Pair as = Put(a);
    const Pair ds = Put(Random(shape.heads, 13));
    const Pair states = Put(Random(kSlots * hp * shape.state, 14, 0.5f));
    const Pair y = Put(std::vector<float>(rows * hp, 0.0f), true);
    for (ExecutorDevice* device : {cuda_.get(), cpu_.get()}) {
      const bool on_cuda = device == cuda_.get();
      const DeviceFloats h = (on_cuda ? xbc.cuda : xbc.cpu)->floats();
      ASSERT_OK(device->SsdChunkScanSegments(
          shape, /*chunk=*/32, h.sub(0, (rows - 1) * stride + hp), stride,
          h.sub(hp, (rows - 1) * stride + gn),
          h.sub(hp + gn, (rows - 1) * stride + gn), stride,
          (on_cuda ? dts.cuda : dts.cpu)->floats(),
          (on_cuda ? as.cuda : as.cpu)->floats(),
          (on_cuda ? ds.cuda : ds.cpu)->floats(),
          (on_cuda ? states.cuda : states.cpu)->floats(),
          on_cuda ? *cuda_segments_ : *cpu_segments_,
          (on_cuda ? y.cuda : y.cpu)->floats()));
    }
    const auto [got_y, want_y] = Get(y);
    EXPECT_LE(RelativeError(got_y, want_y), kF32Tolerance);
    const auto [got_states, want_states] = Get(states);
    EXPECT_LE(RelativeError(got_states, want_states), kF32Tolerance);
  }

  // Carried states (as after reading a few random tokens, so every
  // denominator is a sum of positive features) in every slot.
  void ExpectLinearAttentionMatches(const std::vector<int64_t>& lengths,
                                    const kernels::TaylorAttentionDims& dims,
                                    double tolerance) {
    const int64_t f = dims.feature_dim, hd = dims.head_dim;
    const int64_t fs = 1 + f + f * f;
    const int64_t rows = UploadPass(lengths);
    std::vector<float> kv_states, k_states;
    for (int64_t slot = 0; slot < kSlots; ++slot) {
      std::vector<float> kv, z;
      kernels::cuda::testing::CarriedLinearAttentionState(
          dims.heads, hd, f, 3 + slot, 30 + static_cast<uint32_t>(slot), kv, z);
      kv_states.insert(kv_states.end(), kv.begin(), kv.end());
      k_states.insert(k_states.end(), z.begin(), z.end());
    }
    ASSERT_EQ(static_cast<int64_t>(k_states.size()), kSlots * dims.heads * fs);
    q_host_ = Random(rows * dims.heads * f, 20, 0.5f);
    k_host_ = Random(rows * dims.heads * f, 21, 0.5f);
    v_host_ = Random(rows * dims.heads * hd, 22);
    const Pair q = Put(q_host_);
    const Pair k = Put(k_host_);
    const Pair v = Put(v_host_);
    const Pair kv = Put(kv_states);
    const Pair z = Put(k_states);
    const Pair y = Put(std::vector<float>(rows * dims.heads * hd, 0.0f), true);
    for (ExecutorDevice* device : {cuda_.get(), cpu_.get()}) {
      const bool on_cuda = device == cuda_.get();
      auto of = [&](const Pair& p) {
        return (on_cuda ? p.cuda : p.cpu)->floats();
      };
      ASSERT_OK(device->LinearAttentionSegments(
          of(q), of(k), of(v), dims, 1e-6f, of(kv), of(z),
          on_cuda ? *cuda_segments_ : *cpu_segments_, of(y)));
    }
    const auto [got_y, want_y] = Get(y);
    const auto [got_kv, want_kv] = Get(kv);
    const auto [got_z, want_z] = Get(z);
    // Both against the float64 recurrence.
    std::vector<float> phi_q(rows * dims.heads * fs), phi_k(phi_q.size());
    ASSERT_OK(kernels::TaylorFeatureMap(q_host_, rows * dims.heads, f,
                                        absl::MakeSpan(phi_q)));
    ASSERT_OK(kernels::TaylorFeatureMap(k_host_, rows * dims.heads, f,
                                        absl::MakeSpan(phi_k)));
    std::vector<double> ref_kv(kv_states.begin(), kv_states.end());
    std::vector<double> ref_z(k_states.begin(), k_states.end());
    std::vector<double> ref_y(rows * dims.heads * hd);
    for (const PassSegment& seg : cpu_segments_->segments()) {
      for (int64_t t = seg.first_row; t < seg.first_row + seg.rows; ++t) {
        for (int64_t h = 0; h < dims.heads; ++h) {
          double* st = &ref_kv[(seg.slot * dims.heads + h) * hd * fs];
          double* zt = &ref_z[(seg.slot * dims.heads + h) * fs];
          const float* pq = &phi_q[(t * dims.heads + h) * fs];
          const float* pk = &phi_k[(t * dims.heads + h) * fs];
          const float* vt = &v_host_[(t * dims.heads + h) * hd];
          double den = 0;
          for (int64_t m = 0; m < fs; ++m) {
            zt[m] += pk[m];
            den += double{pq[m]} * zt[m];
          }
          for (int64_t e = 0; e < hd; ++e) {
            double num = 0;
            for (int64_t m = 0; m < fs; ++m) {
              st[e * fs + m] += double{vt[e]} * pk[m];
              num += double{pq[m]} * st[e * fs + m];
            }
            ref_y[(t * dims.heads + h) * hd + e] = num / (den + 1e-6);
          }
        }
      }
    }
    const std::vector<float> y64(ref_y.begin(), ref_y.end());
    const std::vector<float> kv64(ref_kv.begin(), ref_kv.end());
    const std::vector<float> z64(ref_z.begin(), ref_z.end());
    EXPECT_LE(RelativeError(want_y, y64), kF32Tolerance) << "cpu y";
    EXPECT_LE(RelativeError(got_y, y64), tolerance) << "cuda y";
    EXPECT_LE(RelativeError(want_kv, kv64), kF32Tolerance) << "cpu kv";
    EXPECT_LE(RelativeError(got_kv, kv64), tolerance) << "cuda kv";
    EXPECT_LE(RelativeError(want_z, z64), kF32Tolerance) << "cpu z";
    EXPECT_LE(RelativeError(got_z, z64), tolerance) << "cuda z";
  }
  std::vector<float> q_host_, k_host_, v_host_;

  // Rings of random rows (those a segment's position leaves dead must not
  // be read), q | k | v rows with padding between them. Both devices
  // against a float64 rotation and softmax; `one_call`: the CUDA device
  // ran the pass in its own launches, leaving the context workspace (NaN)
  // alone, else it gathered each segment's context there.
  void ExpectWindowMatches(const std::vector<int64_t>& lengths,
                           const std::vector<int64_t>& starts, bool one_call) {
    const kernels::WindowStepDims dims{/*heads=*/2, /*head_dim=*/40,
                                       /*window=*/5};
    const int64_t hd = dims.head_dim, half = hd / 2, window = dims.window;
    const int64_t d = dims.heads * hd;
    const int64_t stride = 3 * d + 6;
    const double base = 10000.0;
    const int64_t rows = UploadPass(lengths, starts);
    int64_t longest = 0;
    for (int64_t n : lengths) longest = std::max(longest, n);
    const std::vector<float> qkv_host = Random(rows * stride, 40);
    const std::vector<float> ring_k_host = Random(kSlots * window * d, 41);
    const std::vector<float> ring_v_host = Random(kSlots * window * d, 42);
    const Pair qkv = Put(qkv_host);
    const Pair ring_k = Put(ring_k_host);
    const Pair ring_v = Put(ring_v_host);
    const Pair context =
        Put(std::vector<float>(2 * (window + longest) * d, 0.0f), true);
    const Pair y = Put(std::vector<float>(rows * d, 0.0f), true);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (ExecutorDevice* device : {cuda_.get(), cpu_.get()}) {
      const bool on_cuda = device == cuda_.get();
      auto of = [&](const Pair& p) {
        return (on_cuda ? p.cuda : p.cpu)->floats();
      };
      ASSERT_OK(device->WindowAttentionSegments(
          of(qkv), stride, dims, static_cast<float>(base), scale, of(ring_k),
          of(ring_v), on_cuda ? *cuda_segments_ : *cpu_segments_, of(context),
          of(y)));
    }
    // The reference: rotated rows, then each query over its keys.
    std::vector<double> ref_qkv(qkv_host.begin(), qkv_host.end());
    std::vector<double> ref_k(ring_k_host.begin(), ring_k_host.end());
    std::vector<double> ref_v(ring_v_host.begin(), ring_v_host.end());
    std::vector<double> ref_y(rows * d);
    for (const PassSegment& seg : cpu_segments_->segments()) {
      for (int64_t i = 0; i < seg.rows; ++i) {
        for (int64_t part = 0; part < 2; ++part) {  // q, then k
          for (int64_t h = 0; h < dims.heads; ++h) {
            double* x =
                &ref_qkv[(seg.first_row + i) * stride + part * d + h * hd];
            for (int64_t f = 0; f < half; ++f) {
              const double angle = static_cast<double>(seg.start + i) *
                                   std::pow(base, -2.0 * f / hd);
              const double x1 = x[f], x2 = x[f + half];
              x[f] = x1 * std::cos(angle) - x2 * std::sin(angle);
              x[f + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
            }
          }
        }
      }
      double* ring_k_of = &ref_k[seg.slot * window * d];
      double* ring_v_of = &ref_v[seg.slot * window * d];
      for (int64_t i = 0; i < seg.rows; ++i) {
        const int64_t p = seg.start + i;
        for (int64_t h = 0; h < dims.heads; ++h) {
          const double* q = &ref_qkv[(seg.first_row + i) * stride + h * hd];
          std::vector<const double*> keys, values;
          for (int64_t j = std::max<int64_t>(0, p - window); j <= p; ++j) {
            if (j < seg.start) {
              keys.push_back(ring_k_of + (j % window) * d + h * hd);
              values.push_back(ring_v_of + (j % window) * d + h * hd);
            } else {
              const double* row =
                  &ref_qkv[(seg.first_row + j - seg.start) * stride];
              keys.push_back(row + d + h * hd);
              values.push_back(row + 2 * d + h * hd);
            }
          }
          std::vector<double> score(keys.size());
          double top = -1e300, sum = 0;
          for (size_t j = 0; j < keys.size(); ++j) {
            double dot = 0;
            for (int64_t e = 0; e < hd; ++e) dot += q[e] * keys[j][e];
            score[j] = dot * scale;
            top = std::max(top, score[j]);
          }
          for (double& sc : score) sum += (sc = std::exp(sc - top));
          for (int64_t e = 0; e < hd; ++e) {
            double out = 0;
            for (size_t j = 0; j < keys.size(); ++j) {
              out += score[j] * values[j][e];
            }
            ref_y[(seg.first_row + i) * d + h * hd + e] = out / sum;
          }
        }
      }
      // The ring keeps the segment's last L keys and values.
      for (int64_t i = std::max<int64_t>(0, seg.rows - window); i < seg.rows;
           ++i) {
        const double* row = &ref_qkv[(seg.first_row + i) * stride];
        const int64_t at = ((seg.start + i) % window) * d;
        std::copy(row + d, row + 2 * d, ring_k_of + at);
        std::copy(row + 2 * d, row + 3 * d, ring_v_of + at);
      }
    }
    const std::pair<const Pair*, const std::vector<double>*> checks[] = {
        {&y, &ref_y}, {&qkv, &ref_qkv}, {&ring_k, &ref_k}, {&ring_v, &ref_v}};
    for (const auto& [pair, ref] : checks) {
      const std::vector<float> want(ref->begin(), ref->end());
      const auto [got_cuda, got_cpu] = Get(*pair);
      const char* what = pair == &y     ? "y"
                         : pair == &qkv ? "rotated q, k"
                                        : "a ring";
      EXPECT_LE(RelativeError(got_cuda, want), kF32Tolerance)
          << "cuda " << what;
      EXPECT_LE(RelativeError(got_cpu, want), kF32Tolerance) << "cpu " << what;
    }
    const auto [cuda_context, cpu_context] = Get(context);
    const bool untouched = std::all_of(cuda_context.begin(), cuda_context.end(),
                                       [](float v) { return std::isnan(v); });
    EXPECT_EQ(untouched, one_call) << "the CUDA device's context workspace";
  }
};

TEST_F(CudaPassSegmentsTest, ConvolutionOfShortSequencesMatchesTheCpu) {
  ExpectConvMatches({1, 7, 33, 2, 63, 5});
}

TEST_F(CudaPassSegmentsTest, ConvolutionWithALongSequenceMatchesTheCpu) {
  ExpectConvMatches({130, 3});
}

TEST_F(CudaPassSegmentsTest, SsdScanOfShortSequencesMatchesTheCpu) {
  ExpectSsdMatches({1, 7, 33, 2, 63, 5});
}

// 70 rows: the chunked form, segment by segment.
TEST_F(CudaPassSegmentsTest, SsdScanWithALongSequenceMatchesTheCpu) {
  ExpectSsdMatches({3, 70});
}

// The published Based shape (F = 16: D = 273, hd = 64) and a small one
// whose hd and D leave lanes and rows of the kernel's layout unused.
TEST_F(CudaPassSegmentsTest, LinearAttentionOfShortSequencesMatchesTheCpu) {
  ExpectLinearAttentionMatches({1, 7, 33, 2, 63, 5}, {2, 64, 16},
                               kF32Tolerance);
  ExpectLinearAttentionMatches({4, 1, 17}, {3, 40, 4}, kF32Tolerance);
}

// 70 rows: each segment as LinearAttention runs it (at F = 16, hd = 64 the
// chunked kernel on bf16 inputs, so outputs and states to bf16's
// tolerance).
TEST_F(CudaPassSegmentsTest, LinearAttentionWithALongSequenceMatchesTheCpu) {
  ExpectLinearAttentionMatches({3, 70}, {3, 40, 4}, kF32Tolerance);
  ExpectLinearAttentionMatches({3, 70}, {1, 64, 16},
                               kernels::cuda::testing::kBf16Tolerance);
}

// Window L = 5: segments from the start of a sequence, within its first
// L tokens, far past them, and longer than L.
TEST_F(CudaPassSegmentsTest, WindowAttentionOfShortSequencesMatchesTheCpu) {
  ExpectWindowMatches({1, 7, 3, 2, 9, 4}, {0, 3, 12, 5, 40, 0},
                      /*one_call=*/true);
}

// 70 rows: each segment's context gathered for the window kernel.
TEST_F(CudaPassSegmentsTest, WindowAttentionWithALongSequenceMatchesTheCpu) {
  ExpectWindowMatches({3, 70}, {2, 9}, /*one_call=*/false);
}
TEST_F(CudaPassSegmentsTest, OverlapsAndSharedSlotsAreRefused) {
  const std::vector<PassSegment> overlapping = {{0, 5, 1}, {4, 3, 2}};
  const std::vector<PassSegment> shared_slot = {{0, 5, 1}, {5, 3, 1}};
  const std::vector<PassSegment> past_the_pass = {{0, 5, 1}, {5, 4, 2}};
  for (ExecutorDevice* device : {cuda_.get(), cpu_.get()}) {
    for (const auto* bad : {&overlapping, &shared_slot, &past_the_pass}) {
      EXPECT_EQ(device->UploadPassSegments(*bad, 8, kSlots).status().code(),
                absl::StatusCode::kInvalidArgument);
    }
    EXPECT_EQ(
        device->UploadPassSegments({{0, 2, kSlots}}, 8, kSlots).status().code(),
        absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        device->UploadPassSegments({{0, 2, 1, -1}}, 8, kSlots).status().code(),
        absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace twice::engine
