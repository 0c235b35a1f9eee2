// GemmRunner: y[m, n] = x[m, k] · W[n, k]^T (+ bias[n]) (+ y) on one stream
// through cuBLASLt, bf16 inputs, f32 accumulation, f32 or bf16 output.
//
// Layouts (row-major, contiguous, the CPU Linear's): x [m, k], W [n, k]
// (nn.Linear [out, in]), bias [n] of the output dtype, y [m, n]. cuBLASLt is
// column-major, so the call computes y^T = W · x^T (A = W with op T,
// B = x with op N, D = y^T with ld n).
// Epilogues that fuse: the bias add (CUBLASLT_EPILOGUE_BIAS), accumulation
// into y (beta = 1: a residual add, y += x W^T) and, for f32 outputs, a
// scale of the product (alpha: y = alpha · x W^T + bias (+ y); Granite-4.0-H's
// residual and logit multipliers).
//
// The algorithm is chosen by cuBLASLt's heuristic once per (m, n, k, output
// dtype, bias, accumulate) and cached with its descriptors; later calls of
// that shape reuse it. m is the token count of a call, so a server sees
// many; the cache keeps the kMaxCachedPlans most recently used shapes and
// evicts the least recently used one (a miss costs one heuristic query). One
// RAII cuBLASLt handle and one 32 MiB workspace per runner, i.e. per stream.
// Requirements (INVALID_ARGUMENT otherwise): every pointer 16-byte aligned
// (DeviceAllocator blocks are), k % 8 == 0 and n % 8 == 0.
// Not thread-safe: a runner belongs to the thread that drives its stream.
#ifndef TWICE_KERNELS_CUDA_GEMM_H_
#define TWICE_KERNELS_CUDA_GEMM_H_

#include <cublasLt.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/stream.h"

namespace twice::kernels::cuda {

struct GemmShape {
  int64_t m = 0;  // rows of x and y
  int64_t n = 0;  // rows of W, columns of y
  int64_t k = 0;  // columns of x and W
};

class GemmRunner {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GemmRunner>> Create(
      const Stream& stream, DeviceAllocator& allocator);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // bias may be empty (no bias). accumulate: y += x W^T instead of y =.
  [[nodiscard]] absl::Status Linear(DeviceSpan<const Bf16> x,
                                    DeviceSpan<const Bf16> weight,
                                    DeviceSpan<const float> bias,
                                    const GemmShape& shape, bool accumulate,
                                    DeviceSpan<float> y, float alpha = 1.0f);
  [[nodiscard]] absl::Status Linear(DeviceSpan<const Bf16> x,
                                    DeviceSpan<const Bf16> weight,
                                    DeviceSpan<const Bf16> bias,
                                    const GemmShape& shape, bool accumulate,
                                    DeviceSpan<Bf16> y);

  static constexpr int64_t kMaxCachedPlans = 128;
  // Shapes whose algorithm is cached (<= kMaxCachedPlans), and heuristic
  // queries made (a miss each), for tests.
  int64_t cached_plans() const { return static_cast<int64_t>(plans_.size()); }
  int64_t plan_misses() const { return plan_misses_; }

 private:
  struct Plan;
  using PlanKey = std::tuple<int64_t, int64_t, int64_t, int, bool, bool>;

  GemmRunner(const Stream& stream, cublasLtHandle_t handle,
             DeviceBuffer workspace);

  [[nodiscard]] absl::Status Run(const void* x, int64_t x_size, const void* w,
                                 int64_t w_size, const void* bias,
                                 int64_t bias_size, void* y, int64_t y_size,
                                 bool y_bf16, const GemmShape& shape,
                                 bool accumulate, float alpha);
  [[nodiscard]] absl::StatusOr<Plan*> GetPlan(const GemmShape& shape,
                                              bool y_bf16, bool bias,
                                              bool accumulate);

  const Stream& stream_;
  cublasLtHandle_t handle_;
  DeviceBuffer workspace_;
  struct CachedPlan {
    std::unique_ptr<Plan> plan;
    std::list<PlanKey>::iterator recency;  // position in lru_
  };
  std::map<PlanKey, CachedPlan> plans_;
  std::list<PlanKey> lru_;  // most recently used first
  int64_t plan_misses_ = 0;
};

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_GEMM_H_
