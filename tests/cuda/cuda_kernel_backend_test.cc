// The CUDA kernel backend behind the kernels/ entry points, against the same
// entry points on the CPU: each op is called twice with the same random
// inputs, once with no backend and once with CudaKernelBackend installed
// (f32 ops <= 1e-5 relative, the bf16 GEMM <= 1e-2), including in-place
// states, strided inputs, the featurized (prefix) linear attention kernel,
// declined shapes (run on the CPU and counted) and weights cached once per
// immutable host region.
#include "kernels/cuda/cuda_kernel_backend.h"

#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/activations.h"
#include "kernels/attention_decode.h"
#include "kernels/backend.h"
#include "kernels/causal_conv1d.h"
#include "kernels/immutable_host_regions.h"
#include "kernels/kernel_stats.h"
#include "kernels/linear.h"
#include "kernels/linear_attention.h"
#include "kernels/prefix_linear_attention.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/taylor_feature_map.h"
#include "kernels/taylor_linear_attention.h"
#include "kernels/tensor_convert.h"
#include "kernels/window_attention.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::kBf16Tolerance;
using testing::kF32Tolerance;
using testing::Random;
using testing::RoundBf16;

class CudaKernelBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    testing::TestSeed();
    absl::StatusOr<std::shared_ptr<CudaKernelBackend>> backend =
        CudaKernelBackend::Create(0);
    ASSERT_OK(backend);
    backend_ = *backend;
  }
  void TearDown() override { SetKernelBackend(nullptr); }

  // Runs `run` on the CPU, then on the device; returns what the device
  // call added to the counts of `op` (kernel_stats.h), so a test whose op
  // was declined to the CPU fails instead of comparing the CPU with itself.
  template <typename Run>
  KernelOpCounts Twice(KernelOp op, Run run) {
    SetKernelBackend(nullptr);
    run(/*on_device=*/false);
    const KernelOpCounts before = backend_->stats().op(op);
    SetKernelBackend(backend_);
    run(/*on_device=*/true);
    SetKernelBackend(nullptr);
    const KernelOpCounts after = backend_->stats().op(op);
    return {after.device_calls - before.device_calls,
            after.cpu_fallbacks - before.cpu_fallbacks};
  }

  std::shared_ptr<CudaKernelBackend> backend_;
};

TEST_F(CudaKernelBackendTest, LinearRunsOnTheGemmAndMatchesCpu) {
  const int64_t m = 37, k = 64, n = 96;
  const std::vector<float> x = RoundBf16(Random(m * k, 1));
  const std::vector<float> w = RoundBf16(Random(n * k, 2));
  const std::vector<float> bias = Random(n, 3);
  std::vector<float> cpu(m * n), gpu(m * n);
  EXPECT_EQ(Twice(KernelOp::kLinear,
                  [&](bool dev) {
                    ASSERT_TRUE(Linear(x, m, k, w, n, bias,
                                       absl::MakeSpan(dev ? gpu : cpu))
                                    .ok());
                  })
                .device_calls,
            1);
  TWICE_EXPECT_REL(gpu, cpu, kBf16Tolerance);
}

TEST_F(CudaKernelBackendTest, UnalignedLinearFallsBackToCpu) {
  const int64_t m = 3, k = 10, n = 7;  // not multiples of 8
  const std::vector<float> x = Random(m * k, 4), w = Random(n * k, 5);
  std::vector<float> cpu(m * n), gpu(m * n);
  const int64_t fallbacks = backend_->stats().cpu_fallbacks;
  EXPECT_EQ(Twice(KernelOp::kLinear,
                  [&](bool dev) {
                    ASSERT_TRUE(Linear(x, m, k, w, n, {},
                                       absl::MakeSpan(dev ? gpu : cpu))
                                    .ok());
                  })
                .device_calls,
            0);
  EXPECT_EQ(backend_->stats().cpu_fallbacks, fallbacks + 1);
  EXPECT_EQ(gpu, cpu);
}

// Weights of every dtype run on the GEMM: bf16 as stored, f16 converted
// and int8 dequantized on the device, each uploaded once (the converted
// tensors are immutable shared buffers). The oracle is the CPU Linear on the
// same tensor (its own low-precision kernel, float64-tested in
// lowp_linear_test); the device rounds x and the weight to bf16.
TEST_F(CudaKernelBackendTest, LowPrecisionWeightsRunOnTheDeviceOnce) {
  const int64_t m = 5, k = 96, n = 72;
  const std::vector<float> x = Random(m * k, 7);
  // Each dtype's weight outlives the loop: a cache miss prunes the copies
  // of weights that are gone, which would take the previous dtype's copy
  // off the count this test reads.
  std::vector<Tensor> weights;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kI8}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    absl::StatusOr<Tensor> w =
        ConvertTensor(Tensor::FromVector({n, k}, Random(n * k, 8)), dtype);
    ASSERT_OK(w);
    ASSERT_NE(w->shared_storage(), nullptr);
    std::vector<float> cpu(m * n), gpu(m * n);
    const int64_t uploaded = backend_->stats().weight_bytes_to_device;
    const int64_t cached = backend_->cached_weight_bytes();
    for (int call = 0; call < 2; ++call) {
      const KernelOpCounts ran = Twice(KernelOp::kLinear, [&](bool dev) {
        ASSERT_TRUE(
            Linear(x, m, k, *w, n, {}, absl::MakeSpan(dev ? gpu : cpu)).ok());
      });
      EXPECT_EQ(ran.device_calls, 1);
      EXPECT_EQ(ran.cpu_fallbacks, 0);
      TWICE_EXPECT_REL(gpu, cpu, kBf16Tolerance);
    }
    // One upload of the stored bytes (and int8's block scales), one bf16
    // copy.
    const int64_t stored =
        w->size() * DTypeSize(dtype) +
        (dtype == DType::kI8
             ? n * I8BlocksPerRow(k) * static_cast<int64_t>(sizeof(float))
             : 0);
    EXPECT_EQ(backend_->stats().weight_bytes_to_device - uploaded, stored);
    EXPECT_GE(backend_->cached_weight_bytes() - cached,
              n * k * static_cast<int64_t>(sizeof(Bf16)));
    weights.push_back(*std::move(w));
  }
}

TEST_F(CudaKernelBackendTest, WeightsInAnImmutableRegionAreUploadedOnce) {
  const int64_t m = 4, k = 64, n = 64;
  const std::vector<float> w = RoundBf16(Random(n * k, 6));
  // A read-only anonymous mapping stands in for a weight file's mapping.
  const size_t bytes = w.size() * sizeof(float);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memcpy(map, w.data(), bytes);
  ASSERT_EQ(::mprotect(map, bytes, PROT_READ), 0);
  const uint64_t region = RegisterImmutableHostRegion(map, bytes);
  const absl::Span<const float> mapped(static_cast<const float*>(map),
                                       w.size());
  SetKernelBackend(backend_);
  std::vector<float> y(m * n), want(m * n);
  for (int call = 0; call < 3; ++call) {
    const std::vector<float> x = RoundBf16(Random(m * k, 10 + call));
    ASSERT_OK(Linear(x, m, k, mapped, n, {}, absl::MakeSpan(y)));
    SetKernelBackend(nullptr);
    ASSERT_OK(Linear(x, m, k, w, n, {}, absl::MakeSpan(want)));
    SetKernelBackend(backend_);
    TWICE_EXPECT_REL(y, want, kBf16Tolerance);
    EXPECT_EQ(backend_->cached_weight_bytes(),
              static_cast<int64_t>(w.size() * sizeof(Bf16)));
  }
  SetKernelBackend(nullptr);
  UnregisterImmutableHostRegion(region);
  ::munmap(map, bytes);
}

TEST_F(CudaKernelBackendTest, RowOpsMatchCpu) {
  const int64_t rows = 19, dim = 96, heads = 3, hd = 32, stride = 110;
  const std::vector<float> x = Random(rows * dim, 20);
  const std::vector<float> w = Random(dim, 21);
  std::vector<float> cpu(rows * dim), gpu(rows * dim);
  EXPECT_EQ(
      Twice(KernelOp::kRmsNorm,
            [&](bool dev) {
              ASSERT_TRUE(kernels::RmsNorm(x, rows, dim, w, 1e-5f,
                                           absl::MakeSpan(dev ? gpu : cpu))
                              .ok());
            })
          .device_calls,
      1);
  TWICE_EXPECT_REL(gpu, cpu, kF32Tolerance);

  std::vector<float> rot_cpu = Random(rows * stride, 22);
  std::vector<float> rot_gpu = rot_cpu;
  EXPECT_EQ(Twice(KernelOp::kRopeRotateHalf,
                  [&](bool dev) {
                    ASSERT_TRUE(kernels::RopeRotateHalf(
                                    absl::MakeSpan(dev ? rot_gpu : rot_cpu),
                                    rows, stride, heads, hd, 17, 1e4f)
                                    .ok());
                  })
                .device_calls,
            1);
  TWICE_EXPECT_REL(rot_gpu, rot_cpu, kF32Tolerance);

  const int64_t hidden = 40;
  const std::vector<float> u = Random(rows * 2 * hidden, 23);
  std::vector<float> sw_cpu(rows * hidden), sw_gpu(rows * hidden);
  EXPECT_EQ(
      Twice(KernelOp::kSwiGlu,
            [&](bool dev) {
              ASSERT_TRUE(kernels::SwiGlu(u, rows, hidden,
                                          absl::MakeSpan(dev ? sw_gpu : sw_cpu))
                              .ok());
            })
          .device_calls,
      1);
  TWICE_EXPECT_REL(sw_gpu, sw_cpu, kF32Tolerance);
  std::vector<float> sm_cpu(rows * hidden), sm_gpu(rows * hidden);
  EXPECT_EQ(
      Twice(KernelOp::kSiluMul,
            [&](bool dev) {
              ASSERT_TRUE(kernels::SiluMul(
                              u, 2 * hidden, absl::MakeSpan(u).subspan(hidden),
                              2 * hidden, rows, hidden,
                              absl::MakeSpan(dev ? sm_gpu : sm_cpu))
                              .ok());
            })
          .device_calls,
      1);
  TWICE_EXPECT_REL(sm_gpu, sm_cpu, kF32Tolerance);

  const int64_t f = 16, width = TaylorFeatureDim(f);
  const std::vector<float> q = Random(rows * f, 24);
  std::vector<float> phi_cpu(rows * width), phi_gpu(rows * width);
  EXPECT_EQ(Twice(KernelOp::kTaylorFeatureMap,
                  [&](bool dev) {
                    ASSERT_TRUE(
                        kernels::TaylorFeatureMap(
                            q, rows, f, absl::MakeSpan(dev ? phi_gpu : phi_cpu))
                            .ok());
                  })
                .device_calls,
            1);
  TWICE_EXPECT_REL(phi_gpu, phi_cpu, kF32Tolerance);
}

TEST_F(CudaKernelBackendTest, ConvUpdatesItsTailLikeCpu) {
  const int64_t channels = 48, stride = 64, kernel = 3, tokens = 29;
  const std::vector<float> x = Random(tokens * stride, 30);
  const std::vector<float> w = Random(channels * kernel, 31);
  std::vector<float> tail_cpu = Random((kernel - 1) * channels, 32);
  std::vector<float> tail_gpu = tail_cpu;
  std::vector<float> cpu(tokens * channels), gpu(tokens * channels);
  EXPECT_EQ(Twice(KernelOp::kCausalConv1d,
                  [&](bool dev) {
                    ASSERT_TRUE(kernels::CausalConv1d(
                                    x, tokens, channels, stride, w, kernel,
                                    absl::MakeSpan(dev ? tail_gpu : tail_cpu),
                                    absl::MakeSpan(dev ? gpu : cpu))
                                    .ok());
                  })
                .device_calls,
            1);
  TWICE_EXPECT_REL(gpu, cpu, kF32Tolerance);
  TWICE_EXPECT_REL(tail_gpu, tail_cpu, kF32Tolerance);
}

// The Based / JRT layers featurize first, then call these with phi inputs:
// every head_dim and feature width, causal prefill, step, prefix with an
// encoder, and a carried state.
TEST_F(CudaKernelBackendTest, FeaturizedLinearAttentionMatchesCpu) {
  // {16, 128, 16} launches 2048 blocks, more than an H200 runs at once, so
  // blocks start after others finished: a kernel that updated z in place
  // from one block would count keys twice in the later ones.
  for (const auto& [heads, hd, f] :
       {std::tuple<int64_t, int64_t, int64_t>{4, 16, 16},
        {2, 64, 16},
        {3, 24, 8},
        {16, 128, 16}}) {
    const int64_t d = TaylorFeatureDim(f);
    const LinearAttentionDims dims{heads, hd, d};
    for (const auto& [tokens, encoder] :
         {std::pair<int64_t, int64_t>{41, 0}, {1, 0}, {23, 17}, {0, 9}}) {
      SCOPED_TRACE(::testing::Message()
                   << "H " << heads << " hd " << hd << " F " << f << " T "
                   << tokens << " E " << encoder);
      // Taylor features, as the layers make them (denominators stay > 0).
      auto features = [&](int64_t rows, uint32_t salt) {
        const std::vector<float> raw = Random(rows * heads * f, salt);
        std::vector<float> out(rows * heads * d);
        EXPECT_TRUE(
            kernels::TaylorFeatureMap(raw, rows * heads, f, absl::MakeSpan(out))
                .ok());
        return out;
      };
      SetKernelBackend(nullptr);
      const std::vector<float> pq = features(tokens, 40),
                               pk = features(tokens, 41);
      const std::vector<float> pke = features(encoder, 42);
      const std::vector<float> v = Random(tokens * heads * hd, 43);
      const std::vector<float> ve = Random(encoder * heads * hd, 44);
      // A carried state made by reading earlier keys, so every
      // denominator phi_q . z is a sum of positive kernel values.
      std::vector<float> kv_cpu, z_cpu;
      testing::CarriedLinearAttentionState(heads, hd, f, 13, 45, kv_cpu, z_cpu);
      std::vector<float> kv_gpu = kv_cpu, z_gpu = z_cpu;
      std::vector<float> y_cpu(tokens * heads * hd), y_gpu(y_cpu.size());
      const KernelOpCounts ran =
          Twice(KernelOp::kPrefixLinearAttention, [&](bool dev) {
            ASSERT_TRUE(PrefixLinearAttentionPrefill(
                            pq, pk, v, tokens, pke, ve, encoder, dims, 1e-6f,
                            absl::MakeSpan(dev ? kv_gpu : kv_cpu),
                            absl::MakeSpan(dev ? z_gpu : z_cpu),
                            absl::MakeSpan(dev ? y_gpu : y_cpu))
                            .ok());
          });
      EXPECT_EQ(ran.device_calls, tokens + encoder > 0 ? 1 : 0);
      EXPECT_EQ(ran.cpu_fallbacks, 0);
      TWICE_EXPECT_REL(y_gpu, y_cpu, kF32Tolerance);
      TWICE_EXPECT_REL(kv_gpu, kv_cpu, kF32Tolerance);
      TWICE_EXPECT_REL(z_gpu, z_cpu, kF32Tolerance);
      if (encoder == 0 && tokens > 0) {
        // The same through the causal entry points.
        std::vector<float> kv2_cpu, z2_cpu;
        testing::CarriedLinearAttentionState(heads, hd, f, 7, 46, kv2_cpu,
                                             z2_cpu);
        std::vector<float> kv2_gpu = kv2_cpu, z2_gpu = z2_cpu;
        const KernelOpCounts ran2 =
            Twice(KernelOp::kPrefixLinearAttention, [&](bool dev) {
              ASSERT_TRUE(LinearAttentionPrefill(
                              pq, pk, v, tokens, dims, 1e-6f,
                              absl::MakeSpan(dev ? kv2_gpu : kv2_cpu),
                              absl::MakeSpan(dev ? z2_gpu : z2_cpu),
                              absl::MakeSpan(dev ? y_gpu : y_cpu))
                              .ok());
              const int64_t row = heads * d;
              std::vector<float> y1(heads * hd);
              ASSERT_TRUE(LinearAttentionStep(
                              absl::MakeSpan(pq).first(row),
                              absl::MakeSpan(pk).first(row),
                              absl::MakeSpan(v).first(heads * hd), dims, 1e-6f,
                              absl::MakeSpan(dev ? kv2_gpu : kv2_cpu),
                              absl::MakeSpan(dev ? z2_gpu : z2_cpu),
                              absl::MakeSpan(y1))
                              .ok());
            });
        EXPECT_EQ(ran2.device_calls, 2);  // the prefill and the step
        EXPECT_EQ(ran2.cpu_fallbacks, 0);
        TWICE_EXPECT_REL(y_gpu, y_cpu, kF32Tolerance);
        TWICE_EXPECT_REL(kv2_gpu, kv2_cpu, kF32Tolerance);
        TWICE_EXPECT_REL(z2_gpu, z2_cpu, kF32Tolerance);
      }
    }
  }
}

// Based's / JRT's linear attention as one op: the published shape (F 16,
// hd 64) runs the fused chunked bf16 kernel, encoder included, from a
// carried state; another shape declines it (counted) and still runs on the
// device as the feature map and the featurized kernel.
TEST_F(CudaKernelBackendTest, TaylorLinearAttentionRunsTheFusedKernel) {
  for (const int64_t f : {16, 4}) {
    SCOPED_TRACE(::testing::Message() << "F=" << f);
    const int64_t heads = 2, hd = 64, t = 100, e = 30;
    const int64_t hf = heads * f, hv = heads * hd;
    const std::vector<float> q = Random(t * hf, 71), k = Random(t * hf, 72);
    const std::vector<float> v = Random(t * hv, 73);
    const std::vector<float> ke = Random(e * hf, 74), ve = Random(e * hv, 75);
    std::vector<float> kv_cpu, z_cpu;
    testing::CarriedLinearAttentionState(heads, hd, f, 12, 76, kv_cpu, z_cpu);
    std::vector<float> kv_gpu = kv_cpu, z_gpu = z_cpu;
    std::vector<float> y_cpu(t * hv), y_gpu(t * hv);
    const KernelBackendStats before = backend_->stats();
    const KernelOpCounts counts =
        Twice(KernelOp::kTaylorLinearAttention, [&](bool dev) {
          ASSERT_OK(TaylorLinearAttention(q, k, v, t, ke, ve, e, {heads, hd, f},
                                          1e-6f,
                                          absl::MakeSpan(dev ? kv_gpu : kv_cpu),
                                          absl::MakeSpan(dev ? z_gpu : z_cpu),
                                          absl::MakeSpan(dev ? y_gpu : y_cpu)));
        });
    if (f == 16) {
      EXPECT_EQ(counts.device_calls, 1);
      EXPECT_EQ(counts.cpu_fallbacks, 0);
    } else {
      EXPECT_EQ(counts.device_calls, 0);
      EXPECT_EQ(counts.cpu_fallbacks, 1);
      const KernelBackendStats after = backend_->stats();
      EXPECT_GT(after.op(KernelOp::kPrefixLinearAttention).device_calls,
                before.op(KernelOp::kPrefixLinearAttention).device_calls);
      EXPECT_GT(after.op(KernelOp::kTaylorFeatureMap).device_calls,
                before.op(KernelOp::kTaylorFeatureMap).device_calls);
    }
    // q, k, v and y are bf16 inside the fused kernel.
    TWICE_EXPECT_REL(y_gpu, y_cpu, kBf16Tolerance);
    TWICE_EXPECT_REL(kv_gpu, kv_cpu, kBf16Tolerance);
    TWICE_EXPECT_REL(z_gpu, z_cpu, kBf16Tolerance);
  }
}

TEST_F(CudaKernelBackendTest, AttentionAndScanMatchCpu) {
  const int64_t heads = 2, hd = 64, width = heads * hd;
  const int64_t past = 9, tokens = 21, q_stride = 3 * width;
  const std::vector<float> q = Random(tokens * q_stride, 50);
  const std::vector<float> k = Random((past + tokens) * width, 51);
  const std::vector<float> v = Random((past + tokens) * width, 52);
  std::vector<float> cpu(tokens * width), gpu(tokens * width);
  EXPECT_EQ(
      Twice(KernelOp::kWindowAttention,
            [&](bool dev) {
              ASSERT_TRUE(kernels::WindowAttention(
                              q, q_stride, k, v, {tokens, past, heads, hd, 8},
                              0.125f, absl::MakeSpan(dev ? gpu : cpu))
                              .ok());
            })
          .device_calls,
      1);
  TWICE_EXPECT_REL(gpu, cpu, kF32Tolerance);
  EXPECT_EQ(Twice(KernelOp::kCausalGqaAttention,
                  [&](bool dev) {
                    ASSERT_TRUE(kernels::CausalGqaAttention(
                                    q, q_stride, k, v,
                                    {tokens, past, heads, heads, hd}, 0.125f,
                                    absl::MakeSpan(dev ? gpu : cpu))
                                    .ok());
                  })
                .device_calls,
            1);
  TWICE_EXPECT_REL(gpu, cpu, kF32Tolerance);

  const SsdShape shape{4, 16, 1, 32};
  const int64_t hp = 64, x_stride = 200, bc_stride = 90, t = 33;
  const std::vector<float> x = Random(t * x_stride, 53);
  const std::vector<float> b = Random(t * bc_stride, 54);
  const std::vector<float> c = Random(t * bc_stride, 55);
  std::vector<float> dt = Random(t * 4, 56, 0.5f);
  for (float& value : dt) value = std::abs(value) + 0.01f;
  const std::vector<float> a = {-0.5f, -1.0f, -2.0f, -0.1f};
  const std::vector<float> dd = Random(4, 57);
  std::vector<float> st_cpu = Random(hp * shape.state, 58), st_gpu = st_cpu;
  std::vector<float> y_cpu(t * hp), y_gpu(t * hp);
  EXPECT_EQ(
      Twice(KernelOp::kSsdChunkScan,
            [&](bool dev) {
              ASSERT_TRUE(SsdChunkScan(shape, t, 16, x, x_stride, b, c,
                                       bc_stride, dt, a, dd,
                                       absl::MakeSpan(dev ? st_gpu : st_cpu),
                                       absl::MakeSpan(dev ? y_gpu : y_cpu))
                              .ok());
            })
          .device_calls,
      1);
  TWICE_EXPECT_REL(y_gpu, y_cpu, kF32Tolerance);
  TWICE_EXPECT_REL(st_gpu, st_cpu, kF32Tolerance);
}

// More (token, head) rows than the warp-per-row kernel's capped grid has
// warps (2^20 blocks of 8): a pass this long runs the tiled kernel, a block
// per 16 rows, so the rows past the first 8.4M must be written too. Only
// the last rows are compared (the CPU computes just those, from the same
// keys).
TEST_F(CudaKernelBackendTest, AttentionCoversRowsPastTheGridCap) {
  const int64_t hd = 32, heads = 1, window = 2;
  const int64_t tokens = (int64_t{1} << 23) + 4099;  // > 2^20 * 8 warps
  const int64_t checked = 4099;
  // Cheap deterministic inputs: 1 GiB per tensor at this size.
  auto fill = [](int64_t n, uint32_t salt) {
    std::vector<float> v(static_cast<size_t>(n));
    uint32_t h = testing::TestSeed() * 2654435761u + salt;
    for (float& x : v) {
      h = h * 1664525u + 1013904223u;
      x = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
    return v;
  };
  const std::vector<float> q = fill(tokens * hd, 60);
  const std::vector<float> k = fill(tokens * hd, 61);
  const std::vector<float> v = fill(tokens * hd, 62);
  std::vector<float> gpu(static_cast<size_t>(tokens * hd), 1e30f);
  SetKernelBackend(backend_);
  const int64_t before =
      backend_->stats().op(KernelOp::kWindowAttention).device_calls;
  ASSERT_TRUE(kernels::WindowAttention(q, hd, k, v,
                                       {tokens, 0, heads, hd, window}, 0.17f,
                                       absl::MakeSpan(gpu))
                  .ok());
  EXPECT_EQ(
      backend_->stats().op(KernelOp::kWindowAttention).device_calls - before,
      1);
  SetKernelBackend(nullptr);
  // The last `checked` queries as a read with past = tokens - checked.
  const int64_t past = tokens - checked;
  std::vector<float> cpu(checked * hd);
  ASSERT_TRUE(kernels::WindowAttention(absl::MakeSpan(q).subspan(past * hd), hd,
                                       k, v, {checked, past, heads, hd, window},
                                       0.17f, absl::MakeSpan(cpu))
                  .ok());
  const std::vector<float> tail(gpu.end() - checked * hd, gpu.end());
  TWICE_EXPECT_REL(tail, cpu, kF32Tolerance);
}

}  // namespace
}  // namespace twice::kernels::cuda
