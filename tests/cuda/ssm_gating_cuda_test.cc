// The Mamba-2 gating kernels on CUDA against their CPU
// twins (kernels/ssm_gating.h), f32 throughout: 1e-5 norm-wise relative,
// on random inputs (seed printed) including the 130M shape's widths.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ssm_gating.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::kF32Tolerance;
using testing::Random;

using SsmGatingCudaTest = CudaTest;

TEST_F(SsmGatingCudaTest, BiasSiluAndSoftplusMatchCpu) {
  // conv_dim and heads of the tiny and 130M shapes; in_proj rows 3352.
  for (auto [rows, cols, heads, stride] :
       {std::tuple{7, 160, 8, 296}, std::tuple{130, 1792, 24, 3352}}) {
    std::vector<float> x = Random(rows * cols, 1, 6.0f);
    const std::vector<float> bias = Random(cols, 2);
    DeviceBuffer dx = Put(x), db = Put(bias);
    ASSERT_OK(BiasSiluRows(*stream_, dx.span<float>(), rows, db.span<float>()));
    ASSERT_OK(kernels::BiasSiluRows(absl::MakeSpan(x), rows, bias));
    TWICE_EXPECT_REL(Get<float>(dx), x, kF32Tolerance);

    const std::vector<float> raw = Random(rows * stride, 3, 30.0f);
    const std::vector<float> dt_bias = Random(heads, 4);
    std::vector<float> want(rows * heads);
    ASSERT_OK(kernels::SoftplusBiasRows(absl::MakeConstSpan(raw).subspan(5),
                                        rows, stride, dt_bias,
                                        absl::MakeSpan(want)));
    DeviceBuffer draw = Put(raw), ddt = Put(dt_bias);
    DeviceBuffer dout = Zeros<float>(rows * heads);
    ASSERT_OK(SoftplusBiasRows(
        *stream_, draw.span<const float>().subspan(5, rows * stride - 5), rows,
        stride, ddt.span<float>(), dout.span<float>()));
    TWICE_EXPECT_REL(Get<float>(dout), want, kF32Tolerance);
  }
}

TEST_F(SsmGatingCudaTest, GatedGroupRmsNormMatchesCpuInPlace) {
  for (auto [rows, width, groups, z_stride] :
       {std::tuple{5, 128, 1, 296}, std::tuple{9, 1536, 1, 3352},
        std::tuple{4, 512, 8, 600}}) {
    const std::vector<float> z = Random(rows * z_stride, 5, 4.0f);
    const std::vector<float> y = Random(rows * width, 6, 2.0f);
    const std::vector<float> w = Random(width, 7);
    std::vector<float> want(rows * width);
    ASSERT_OK(kernels::GatedGroupRmsNorm(z, z_stride, y, rows, width, groups, w,
                                         1e-5, absl::MakeSpan(want)));
    DeviceBuffer dz = Put(z), dy = Put(y), dw = Put(w);
    ASSERT_OK(GatedGroupRmsNorm(*stream_, dz.span<float>(), z_stride,
                                dy.span<float>(), rows, width, groups,
                                dw.span<float>(), 1e-5, dy.span<float>()));
    TWICE_EXPECT_REL(Get<float>(dy), want, kF32Tolerance);
  }
}

}  // namespace
}  // namespace twice::kernels::cuda
