// The mixture-of-experts row moves on CUDA against their CPU twins
// (kernels/top_k_routing.h) on routes of random router logits: the gather
// exactly, the combine within f32 summation order (1e-5). Outputs start as
// NaN where the kernel must write, so a launch that did nothing fails; a bad
// table is refused before any launch.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/top_k_routing.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kF32Tolerance;
using testing::Random;

using TopKRoutingCudaTest = CudaTest;

// The routes' three arrays on the device, and the view the ops read.
struct RoutesOnDevice {
  DeviceBuffer source_row, entry, gate;
  DeviceRoutesView view;
};

TEST_F(TopKRoutingCudaTest, GatherAndCombineMatchCpu) {
  struct Shape {
    int64_t rows, experts, k, cols;
  };
  for (const Shape& c : {Shape{1, 64, 6, 1536}, Shape{16, 64, 6, 1536},
                         Shape{512, 62, 8, 96}, Shape{37, 4, 2, 64}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.rows << " rows, E " << c.experts << ", k " << c.k);
    const std::vector<float> logits = Random(c.rows * c.experts, 1, 3.0f);
    ASSERT_OK_AND_ASSIGN(TopKRoutes routes,
                         RouteTopK(logits, c.rows, c.experts, c.k));
    const int64_t n = c.rows * c.k;
    DeviceBuffer source_row = Put(routes.source_row);
    DeviceBuffer entry = Put(routes.entry);
    DeviceBuffer gate = Put(routes.gate);
    const DeviceRoutesView view{&routes,
                                {source_row.span<int32_t>().data, n},
                                {entry.span<int32_t>().data, n},
                                {gate.span<float>().data, n}};

    const std::vector<float> h = Random(c.rows * c.cols, 2);
    std::vector<float> want_gathered(n * c.cols);
    ASSERT_OK(kernels::GatherRows(h, c.cols, routes.source_row,
                                  absl::MakeSpan(want_gathered)));
    DeviceBuffer dh = Put(h);
    DeviceBuffer dg = Put(std::vector<float>(
        n * c.cols, std::numeric_limits<float>::quiet_NaN()));
    ASSERT_OK(
        GatherRows(*stream_, dh.span<float>(), c.cols, view, dg.span<float>()));
    EXPECT_EQ(Get<float>(dg), want_gathered);

    const std::vector<float> base = Random(c.rows * c.cols, 3);
    const std::vector<float> routed = Random(n * c.cols, 4);
    std::vector<float> x = Random(c.rows * c.cols, 5);
    DeviceBuffer dbase = Put(base), drouted = Put(routed), dx = Put(x);
    ASSERT_OK(kernels::CombineRoutedRows(base, routed, c.cols, routes, 0.25f,
                                         /*accumulate=*/true,
                                         absl::MakeSpan(x)));
    ASSERT_OK(CombineRoutedRows(*stream_, dbase.span<float>(),
                                drouted.span<float>(), c.cols, view, 0.25f,
                                dx.span<float>()));
    TWICE_EXPECT_REL(Get<float>(dx), x, kF32Tolerance);
  }
}

TEST_F(TopKRoutingCudaTest, BadRoutesAreRefusedBeforeAnyLaunch) {
  const std::vector<float> logits = Random(3 * 8, 6);
  ASSERT_OK_AND_ASSIGN(TopKRoutes routes, RouteTopK(logits, 3, 8, 2));
  DeviceBuffer source_row = Put(routes.source_row);
  DeviceBuffer entry = Put(routes.entry);
  DeviceBuffer gate = Put(routes.gate);
  const int64_t cols = 16;
  DeviceBuffer dh = Put(Random(3 * cols, 7));
  const std::vector<float> before(3 * cols, 5.0f);
  DeviceBuffer dx = Put(before);
  DeviceBuffer dg = Zeros<float>(6 * cols);

  // Device arrays shorter than the host copy.
  const DeviceRoutesView short_view{&routes,
                                    {source_row.span<int32_t>().data, 5},
                                    {entry.span<int32_t>().data, 6},
                                    {gate.span<float>().data, 6}};
  EXPECT_EQ(
      GatherRows(*stream_, dh.span<float>(), cols, short_view, dg.span<float>())
          .code(),
      absl::StatusCode::kInvalidArgument);
  // A host table whose entry is used twice.
  TopKRoutes bad = routes;
  bad.entry[1] = bad.entry[0];
  const DeviceRoutesView bad_view{&bad,
                                  {source_row.span<int32_t>().data, 6},
                                  {entry.span<int32_t>().data, 6},
                                  {gate.span<float>().data, 6}};
  EXPECT_EQ(CombineRoutedRows(*stream_, dh.span<float>(), dg.span<float>(),
                              cols, bad_view, 1.0f, dx.span<float>())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Get<float>(dx), before);
}

}  // namespace
}  // namespace twice::kernels::cuda
