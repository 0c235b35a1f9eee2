// Device plumbing: error conversion (runs without a GPU), the caching
// allocator, copies, and cuBLASLt GEMMs against the CPU Linear.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm.h"
#include "kernels/linear.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::Random;
using testing::RoundBf16;

TEST(CudaStatusTest, MapsErrorClasses) {
  EXPECT_OK(CudaStatus(cudaSuccess, "x"));
  EXPECT_EQ(CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaStatus(cudaErrorInsufficientDriver, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaStatus(cudaErrorInvalidValue, "x").code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status launch = CudaStatus(cudaErrorLaunchFailure, "MyKernel");
  EXPECT_EQ(launch.code(), absl::StatusCode::kInternal);
  EXPECT_NE(launch.message().find("MyKernel"), absl::string_view::npos);
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_NOT_SUPPORTED, "x").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_EXECUTION_FAILED, "x").code(),
            absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(ToBf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(FromBf16(ToBf16(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(FromBf16(ToBf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(FromBf16(ToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(DeviceAllocator::SizeClass(1), 256u);
  EXPECT_EQ(DeviceAllocator::SizeClass(300), 512u);
  EXPECT_EQ(DeviceAllocator::SizeClass((1 << 20) + 1), 2u << 20);
}

TEST(CudaNoDeviceTest, StreamFailsCleanlyWithoutDevice) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  auto stream = Stream::Create(0);
  EXPECT_FALSE(stream.ok());
  DeviceAllocator allocator;
  auto buf = allocator.Allocate(1024);
  EXPECT_FALSE(buf.ok());
}

using CudaPlumbingTest = CudaTest;

TEST_F(CudaPlumbingTest, AllocatorReusesFreedBlocks) {
  DeviceAllocator allocator;
  void* first = nullptr;
  {
    auto a = allocator.Allocate(1000);
    ASSERT_OK(a);
    first = a->data();
    EXPECT_EQ(allocator.bytes_in_use(), 1024);
  }
  EXPECT_EQ(allocator.bytes_in_use(), 0);
  EXPECT_EQ(allocator.bytes_cached(), 1024);
  auto b = allocator.Allocate(900);  // same size class
  ASSERT_OK(b);
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(allocator.malloc_calls(), 1);
  auto c = allocator.Allocate(3 << 20);
  ASSERT_OK(c);
  EXPECT_EQ(allocator.malloc_calls(), 2);
  allocator.Trim();
  EXPECT_EQ(allocator.bytes_cached(), 0);
  auto empty = allocator.Allocate(0);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_FALSE(allocator.Allocate(-1).ok());
}

TEST_F(CudaPlumbingTest, CopiesRoundTrip) {
  const std::vector<float> host = Random(12345, 1);
  DeviceBuffer buf = Put(host);
  EXPECT_EQ(Get<float>(buf), host);
}

TEST_F(CudaPlumbingTest, GemmMatchesCpuLinear) {
  auto runner = GemmRunner::Create(*stream_, *allocator_);
  ASSERT_OK(runner);
  struct Case {
    int64_t m, n, k;
  };
  for (const Case& c : {Case{1, 64, 64}, Case{37, 256, 1024},
                        Case{512, 1024, 1024}, Case{3, 8, 8}}) {
    SCOPED_TRACE(::testing::Message() << c.m << "x" << c.n << "x" << c.k);
    const std::vector<float> x = RoundBf16(Random(c.m * c.k, 2));
    const std::vector<float> w = RoundBf16(Random(c.n * c.k, 3, 0.05f));
    const std::vector<float> bias = Random(c.n, 4);
    std::vector<float> want(c.m * c.n);
    ASSERT_OK(Linear(x, c.m, c.k, w, c.n, bias, absl::MakeSpan(want)));

    DeviceBuffer dx = PutBf16(x);
    DeviceBuffer dw = PutBf16(w);
    DeviceBuffer db = Put(bias);
    DeviceBuffer dy = Zeros<float>(c.m * c.n);
    const GemmShape shape{c.m, c.n, c.k};
    ASSERT_TRUE((*runner)
                    ->Linear(dx.span<Bf16>(), dw.span<Bf16>(), db.span<float>(),
                             shape, false, dy.span<float>())
                    .ok());
    // f32 output from bf16 inputs: only the summation order differs.
    TWICE_EXPECT_REL(Get<float>(dy), want, 1e-5);

    // Accumulate (residual add): y += x W^T + bias.
    ASSERT_TRUE((*runner)
                    ->Linear(dx.span<Bf16>(), dw.span<Bf16>(), db.span<float>(),
                             shape, true, dy.span<float>())
                    .ok());
    std::vector<float> doubled = want;
    for (float& v : doubled) v *= 2.0f;
    TWICE_EXPECT_REL(Get<float>(dy), doubled, 1e-5);

    // A scaled product (alpha, Granite-4.0-H's multipliers), set then
    // accumulated: 0.25 · x W^T, then += 0.5 · x W^T.
    std::vector<float> product(c.m * c.n);
    ASSERT_OK(Linear(x, c.m, c.k, w, c.n, {}, absl::MakeSpan(product)));
    DeviceBuffer dz = Zeros<float>(c.m * c.n);
    ASSERT_OK((*runner)->Linear(dx.span<Bf16>(), dw.span<Bf16>(), {}, shape,
                                false, dz.span<float>(), 0.25f));
    std::vector<float> scaled = product;
    for (float& v : scaled) v *= 0.25f;
    TWICE_EXPECT_REL(Get<float>(dz), scaled, 1e-5);
    ASSERT_OK((*runner)->Linear(dx.span<Bf16>(), dw.span<Bf16>(), {}, shape,
                                true, dz.span<float>(), 0.5f));
    for (float& v : scaled) v *= 3.0f;  // 0.75 · x W^T
    TWICE_EXPECT_REL(Get<float>(dz), scaled, 1e-5);

    // bf16 output, bf16 bias.
    DeviceBuffer db16 = PutBf16(bias);
    DeviceBuffer dy16 = Zeros<Bf16>(c.m * c.n);
    ASSERT_TRUE((*runner)
                    ->Linear(dx.span<Bf16>(), dw.span<Bf16>(),
                             db16.span<Bf16>(), shape, false, dy16.span<Bf16>())
                    .ok());
    TWICE_EXPECT_REL(GetBf16(dy16), want, testing::kBf16Tolerance);
  }
  // One plan per (shape, dtype, bias, accumulate), whatever alpha; reruns
  // hit the cache.
  EXPECT_EQ((*runner)->cached_plans(), 4 * 5);
  DeviceBuffer dx = Zeros<Bf16>(8 * 8);
  DeviceBuffer dy = Zeros<float>(3 * 8);
  EXPECT_EQ((*runner)
                ->Linear(dx.span<Bf16>(), dx.span<Bf16>(), {}, {3, 8, 8}, false,
                         dy.span<float>())
                .code(),
            absl::StatusCode::kInvalidArgument);  // x has 64 elements, not 24
  EXPECT_EQ((*runner)
                ->Linear(dx.span<Bf16>(), dx.span<Bf16>(), {}, {8, 4, 8}, false,
                         dy.span<float>())
                .code(),
            absl::StatusCode::kInvalidArgument);  // n % 8 != 0
}

// A server sees a new m (token count) on nearly every prefill: the plan
// cache keeps the most recent kMaxCachedPlans shapes, a hit on a recent one
// queries no heuristic, and results stay right after evictions.
TEST_F(CudaPlumbingTest, GemmPlanCacheIsBoundedAndKeepsRecentShapes) {
  absl::StatusOr<std::unique_ptr<GemmRunner>> runner =
      GemmRunner::Create(*stream_, *allocator_);
  ASSERT_OK(runner);
  const int64_t n = 16, k = 32, max_m = GemmRunner::kMaxCachedPlans + 40;
  const std::vector<float> x = RoundBf16(Random(max_m * k, 70));
  const std::vector<float> w = RoundBf16(Random(n * k, 71));
  DeviceBuffer dx = PutBf16(x);
  DeviceBuffer dw = PutBf16(w);
  DeviceBuffer dy = Zeros<float>(max_m * n);
  auto run = [&](int64_t m) {
    ASSERT_TRUE((*runner)
                    ->Linear({dx.span<Bf16>().data, m * k}, dw.span<Bf16>(), {},
                             {m, n, k}, false, {dy.span<float>().data, m * n})
                    .ok());
  };
  for (int64_t m = 1; m <= max_m; ++m) run(m);
  EXPECT_EQ((*runner)->cached_plans(), GemmRunner::kMaxCachedPlans);
  EXPECT_EQ((*runner)->plan_misses(), max_m);
  run(max_m);  // the most recent shape: a hit
  EXPECT_EQ((*runner)->plan_misses(), max_m);
  run(1);  // evicted long ago: a miss, and still right
  EXPECT_EQ((*runner)->plan_misses(), max_m + 1);
  EXPECT_EQ((*runner)->cached_plans(), GemmRunner::kMaxCachedPlans);
  std::vector<float> want(max_m * n);
  ASSERT_OK(Linear(x, max_m, k, w, n, {}, absl::MakeSpan(want)));
  TWICE_EXPECT_REL(Get<float>(dy), want, 1e-5);
}

}  // namespace
}  // namespace twice::kernels::cuda
