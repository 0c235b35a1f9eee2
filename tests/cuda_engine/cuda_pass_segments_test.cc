// The CUDA executor device's operations over the segments of a prefill
// pass of several sequences (CausalConv1dSegments, SsdChunkScanSegments:
// every segment in one launch) against the CPU device's segment-by-segment
// forms, on fresh random inputs (seed printed by the test utilities):
// segments of 1 to 63 rows in scattered slots of a pool, slots outside the
// pass left as they were, the convolution's tails and the SSD states
// continued per slot. A pass with a segment of 64 rows or more runs the
// chunked scan per segment instead, with the same results. The CUDA
// outputs start as NaN, so matching the CPU shows the device wrote them.
// Both devices refuse segments that overlap or share a slot. SKIPPED
// without a GPU.
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_info.h"
#include "kernels/pass_segments.h"
#include "kernels/ssd_chunk_scan.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using kernels::PassSegment;
using kernels::cuda::testing::kF32Tolerance;
using kernels::cuda::testing::Random;
using kernels::cuda::testing::RelativeError;

constexpr int64_t kSlots = 8;

// The same host values on the CUDA and the CPU device.
struct Pair {
  std::unique_ptr<DeviceArray> cuda, cpu;
};

class CudaPassSegmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_OK_AND_ASSIGN(cuda_, NewCudaExecutorDevice(0));
    cpu_ = NewCpuExecutorDevice();
  }

  // `host` on both devices; with `poison`, the CUDA copy is NaN instead.
  Pair Put(const std::vector<float>& host, bool poison = false) {
    Pair p;
    const int64_t n = static_cast<int64_t>(host.size());
    p.cuda = *cuda_->Allocate(n);
    p.cpu = *cpu_->Allocate(n);
    const std::vector<float> nan(host.size(), NAN);
    EXPECT_OK(cuda_->CopyToDevice(poison ? nan : host, p.cuda->floats()));
    EXPECT_OK(cpu_->CopyToDevice(host, p.cpu->floats()));
    return p;
  }
  // The CUDA copy and the CPU copy.
  std::pair<std::vector<float>, std::vector<float>> Get(const Pair& p) {
    const size_t n = static_cast<size_t>(p.cpu->floats().size);
    std::vector<float> got(n), want(n);
    EXPECT_OK(cuda_->CopyToHost(p.cuda->floats(), absl::MakeSpan(got)));
    EXPECT_OK(cpu_->CopyToHost(p.cpu->floats(), absl::MakeSpan(want)));
    return {got, want};
  }

  // Both devices' uploads of `segments` over `rows` pass rows.
  void Upload(const std::vector<PassSegment>& segments, int64_t rows) {
    ASSERT_OK_AND_ASSIGN(cuda_segments_,
                         cuda_->UploadPassSegments(segments, rows, kSlots));
    ASSERT_OK_AND_ASSIGN(cpu_segments_,
                         cpu_->UploadPassSegments(segments, rows, kSlots));
  }

  // A pass of segments of `lengths` rows in the scattered slots 5, 0, 3,
  // 7, 1, 6, ...: its row count.
  int64_t UploadPass(const std::vector<int64_t>& lengths) {
    static constexpr int64_t kScattered[] = {5, 0, 3, 7, 1, 6, 2, 4};
    std::vector<PassSegment> segments;
    int64_t rows = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      segments.push_back({rows, lengths[i], kScattered[i % kSlots]});
      rows += lengths[i];
    }
    Upload(segments, rows);
    return rows;
  }

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

  std::unique_ptr<ExecutorDevice> cuda_, cpu_;
  std::unique_ptr<DevicePassSegments> cuda_segments_, cpu_segments_;
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
  }
}

}  // namespace
}  // namespace twice::engine
