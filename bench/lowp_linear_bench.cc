// Time per row of x of one kernels::Linear call with f32, bf16 and int8
// weights, for batch sizes on both sides of where the kernels change path
// (kernels/cpu/linear_lowp_cpu.cc): one row (the GEMVs), up to 64 rows
// (batched decode) and prefill-sized batches. On a CPU with AMX-BF16 the
// last column times bf16 again with the tiles turned off (the vdpbf16ps
// GEMM).
//
//   lowp_linear_bench [threads=2] [rows=N,K ...]
//
// Rows default to the Mamba-2 130M shapes (in_proj 3352 x 768, out_proj
// 768 x 1536). Weights are random normal; every dtype gets the same
// values. The time is the best of repeated calls for at least 0.3 s
// (weights of these sizes sit in L3 between calls, so this measures
// compute, not memory streaming: twice-bench engine has the decode bound).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "kernels/cpu/bf16_amx_gemm.h"
#include "kernels/linear.h"
#include "kernels/tensor_convert.h"
#include "kernels/threading.h"

namespace {

using twice::kernels::ConvertTensor;
using twice::kernels::DType;
using twice::kernels::Tensor;
using twice::kernels::cpu::AmxBf16Usable;
using twice::kernels::cpu::SetAmxAllowed;

double BestSecondsPerCall(const std::vector<float>& x, int64_t m, int64_t k,
                          const Tensor& w, int64_t n) {
  std::vector<float> y(static_cast<size_t>(m * n));
  double best = 1e30, total = 0;
  for (int i = 0; i < 3 || (total < 0.3 && i < 10000); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status s =
        twice::kernels::Linear(x, m, k, w, n, {}, absl::MakeSpan(y));
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!s.ok()) {
      std::fprintf(stderr, "Linear: %s\n", std::string(s.message()).c_str());
      std::exit(1);
    }
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  if (threads < 1 || !twice::kernels::SetCpuThreads(threads).ok()) {
    std::fprintf(stderr, "usage: lowp_linear_bench [threads] [N,K ...]\n");
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int a = 2; a < argc; ++a) {
    long long n = 0, k = 0;
    if (std::sscanf(argv[a], "%lld,%lld", &n, &k) != 2 || n < 1 || k < 1) {
      std::fprintf(stderr, "bad shape \"%s\" (want N,K)\n", argv[a]);
      return 2;
    }
    shapes.emplace_back(n, k);
  }
  if (shapes.empty()) shapes = {{3352, 768}, {768, 1536}};
  const int64_t batch_rows[] = {1, 4, 16, 64, 65, 256, 2048};
  // The bf16 GEMM's other kernel on the same CPU (vdpbf16ps), where the
  // tile product runs: prefill-sized rows of the bf16 column use AMX.
  const bool amx = AmxBf16Usable();
  std::printf(
      "%6s %6s %5s | %10s %10s %10s %12s   (us per row of x, %d "
      "threads)\n",
      "n", "k", "m", "f32", "bf16", "int8", "bf16 no-AMX", threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (const auto& [n, k] : shapes) {
    std::vector<float> values(static_cast<size_t>(n * k));
    for (float& v : values) v = 0.05f * normal(rng);
    const Tensor f32 = Tensor::FromVector({n, k}, values);
    const Tensor bf16 = *ConvertTensor(f32, DType::kBF16);
    const Tensor int8 = *ConvertTensor(f32, DType::kI8);
    for (int64_t m : batch_rows) {
      std::vector<float> x(static_cast<size_t>(m * k));
      for (float& v : x) v = normal(rng);
      const double per_row = 1e6 / static_cast<double>(m);
      std::printf("%6lld %6lld %5lld | %10.1f %10.1f %10.1f",
                  static_cast<long long>(n), static_cast<long long>(k),
                  static_cast<long long>(m),
                  BestSecondsPerCall(x, m, k, f32, n) * per_row,
                  BestSecondsPerCall(x, m, k, bf16, n) * per_row,
                  BestSecondsPerCall(x, m, k, int8, n) * per_row);
      if (amx) {
        SetAmxAllowed(false);
        std::printf(" %12.1f", BestSecondsPerCall(x, m, k, bf16, n) * per_row);
        SetAmxAllowed(true);
      } else {
        std::printf(" %12s", "-");
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
