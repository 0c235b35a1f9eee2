// The CUDA Mamba-2 SSD kernels' source replayed on the CPU (cuda_replay.h)
// against the CPU twin (kernels/ssd_chunk_scan.h), in both thread orders:
// the chunked scan with its products on tensor cores (ssd_chunked_tc_cuda.cu,
// TF32 inputs) and on the CUDA cores (ssd_chunked_cuda.cu), in passes that
// continue each other, and the recurrent kernel (sequence_cuda.cu).
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/cuda/launch.h"
#include "kernels/ssd_chunk_scan.h"
#include "tests/cuda_replay/replay_test_util.h"

namespace twice::cuda_replay {
namespace {

namespace launch = kernels::cuda::launch;
using kernels::SsdShape;
using testing::kF32Tolerance;
using testing::kTf32Tolerance;
using testing::kThreadOrders;
using testing::Random;

// n floats starting on a 32-byte boundary (the tensor-core workspace's
// alignment; a vector's storage is only 16-byte aligned).
class AlignedFloats {
 public:
  explicit AlignedFloats(int64_t n) : storage_(n + 8, NAN) {}
  float* data() {
    const auto address = reinterpret_cast<uintptr_t>(storage_.data());
    return storage_.data() + (32 - address % 32) % 32 / sizeof(float);
  }

 private:
  std::vector<float> storage_;
};

// One read of `tokens` random tokens from a random state: the CPU twin's y
// and final state.
struct SsdRead {
  SsdRead(const SsdShape& shape, int64_t tokens, int64_t chunk)
      : shape(shape),
        tokens(tokens),
        stride(shape.heads * shape.head_dim + 2 * shape.groups * shape.state),
        a(Random(shape.heads, 110)),
        d(Random(shape.heads, 111)),
        initial(Random(shape.heads * shape.head_dim * shape.state, 112, 0.5f)),
        xbc(Random(tokens * stride, 113 + tokens)),
        dt(Random(tokens * shape.heads, 114 + tokens)) {
    for (float& x : a) x = -std::exp(x);
    for (float& x : dt) x = std::log1p(std::exp(x)) * 0.2f;  // softplus
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t gn = shape.groups * shape.state;
    const absl::Span<const float> h(xbc);
    want_y.assign(tokens * hp, 0.0f);
    want_state = initial;
    EXPECT_TRUE(kernels::SsdChunkScan(shape, tokens, chunk, h, stride,
                                      h.subspan(hp), h.subspan(hp + gn), stride,
                                      dt, a, d, absl::MakeSpan(want_state),
                                      absl::MakeSpan(want_y))
                    .ok());
  }

  // The launch arguments over copies of the initial state and a NaN y.
  launch::SsdArgs Args(std::vector<float>& state, std::vector<float>& y) const {
    const int64_t hp = shape.heads * shape.head_dim;
    const int64_t gn = shape.groups * shape.state;
    state = initial;
    y.assign(tokens * hp, NAN);
    launch::SsdArgs args;
    args.heads = static_cast<int>(shape.heads);
    args.head_dim = static_cast<int>(shape.head_dim);
    args.groups = static_cast<int>(shape.groups);
    args.state = static_cast<int>(shape.state);
    args.tokens = tokens;
    args.x = xbc.data();
    args.x_stride = stride;
    args.b = xbc.data() + hp;
    args.c = xbc.data() + hp + gn;
    args.bc_stride = stride;
    args.dt = dt.data();
    args.a = a.data();
    args.d = d.data();
    args.ssm_state = state.data();
    args.y = y.data();
    return args;
  }

  SsdShape shape;
  int64_t tokens;
  int64_t stride;
  std::vector<float> a, d, initial, xbc, dt, want_y, want_state;
};

TEST(SsdReplayTest, ChunkedScanMatchesCpu) {
  const SsdShape shapes[] = {
      {4, 64, 2, 32},    // H, P, G, N
      {3, 48, 3, 80},    // every head its own group, no power of two
      {2, 128, 1, 16},   // the largest P, the smallest N of the tensor cores
      {2, 24, 1, 40},    // not for the tensor cores
      {1, 128, 1, 128},  // the largest tiles
  };
  // (tokens, chunk, chunks per pass): a short last chunk, one chunk, passes
  // that continue each other.
  const std::tuple<int64_t, int64_t, int64_t> reads[] = {
      {70, 32, 8}, {31, 32, 8}, {300, 64, 2}, {260, 256, 1}};
  for (const SsdShape& shape : shapes) {
    const bool tensor_core_shape = launch::SsdTensorCoresSupported(
        static_cast<int>(shape.head_dim), static_cast<int>(shape.state));
    EXPECT_EQ(tensor_core_shape,
              shape.head_dim % 16 == 0 && shape.state % 16 == 0);
    for (const auto& [tokens, chunk, per_pass] : reads) {
      // The largest tiles (the most shared memory and accumulators) for
      // one read: they are the slowest to replay.
      if (shape.state == 128 && tokens != 70) continue;
      const SsdRead read(shape, tokens, chunk);
      ASSERT_TRUE(launch::SsdChunkedSupported(static_cast<int>(shape.head_dim),
                                              static_cast<int>(shape.state),
                                              chunk));
      for (const bool tensor_cores : {true, false}) {
        if (tensor_cores && !tensor_core_shape) continue;
        for (const ThreadOrder order : kThreadOrders) {
          SCOPED_TRACE(
              ::testing::Message()
              << "H=" << shape.heads << " P=" << shape.head_dim
              << " N=" << shape.state << " T=" << tokens << " chunk " << chunk
              << " per pass " << per_pass
              << (tensor_cores ? " tensor cores" : " f32")
              << (order == ThreadOrder::kIncreasing ? "" : " reversed"));
          SetThreadOrder(order);
          std::vector<float> state, y;
          const launch::SsdArgs args = read.Args(state, y);
          AlignedFloats workspace(per_pass * shape.heads * shape.head_dim *
                                  shape.state);
          AlignedFloats decay(per_pass * shape.heads);
          const int64_t launches = Launches();
          ASSERT_EQ(launch::SsdChunkedScan(args, static_cast<int>(chunk),
                                           per_pass, workspace.data(),
                                           decay.data(), tensor_cores, nullptr),
                    cudaSuccess);
          // Three kernels a pass.
          EXPECT_EQ(Launches() - launches,
                    3 * ((tokens + chunk * per_pass - 1) / (chunk * per_pass)));
          const double tolerance =
              tensor_cores ? kTf32Tolerance : kF32Tolerance;
          TWICE_EXPECT_REPLAY_REL(y, read.want_y, tolerance);
          TWICE_EXPECT_REPLAY_REL(state, read.want_state, tolerance);
          if (tensor_cores) {
            // TF32 inputs move random values by ~1e-4, where f32 stays
            // within its 1e-5: the tensor-core form ran.
            EXPECT_GT(::twice::testing::NormRelativeError(y, read.want_y),
                      kF32Tolerance);
          }
        }
      }
    }
  }
}

TEST(SsdReplayTest, TensorCoresRefuseAnUnalignedWorkspace) {
  const SsdRead read({2, 32, 1, 16}, 40, 32);
  std::vector<float> state, y;
  const launch::SsdArgs args = read.Args(state, y);
  AlignedFloats workspace(2 * 32 * 16 + 8), decay(2);
  EXPECT_EQ(
      launch::SsdChunkedScan(args, 32, 2, workspace.data() + 4, decay.data(),
                             /*tensor_cores=*/true, nullptr),
      cudaErrorInvalidValue);
}

TEST(SsdReplayTest, RecurrentScanMatchesCpu) {
  for (const SsdShape& shape :
       {SsdShape{4, 64, 2, 32}, SsdShape{3, 48, 3, 80}}) {
    const SsdRead read(shape, 23, 16);
    for (const ThreadOrder order : kThreadOrders) {
      SCOPED_TRACE(::testing::Message() << "P=" << shape.head_dim);
      SetThreadOrder(order);
      std::vector<float> state, y;
      ASSERT_EQ(launch::SsdScan(read.Args(state, y), nullptr), cudaSuccess);
      TWICE_EXPECT_REPLAY_REL(y, read.want_y, kF32Tolerance);
      TWICE_EXPECT_REPLAY_REL(state, read.want_state, kF32Tolerance);
    }
  }
}

}  // namespace
}  // namespace twice::cuda_replay
