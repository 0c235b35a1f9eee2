// What a kernel backend did, per op: calls it ran on its device, calls it
// declined to the CPU, and the bytes it copied between host and device.
// A device test asserts on the op it exercises (a declined op must fail the
// test, not pass on the CPU), and the server exports the totals.
//
// KernelStatsCounters is the thread-safe accumulator a backend keeps;
// stats() snapshots it into the plain KernelBackendStats value.
#ifndef TWICE_KERNELS_KERNEL_STATS_H_
#define TWICE_KERNELS_KERNEL_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace twice::kernels {

// The entry points of kernels/backend.h. LinearAttentionPrefill and Step
// are kPrefixLinearAttention (they are that op with no encoder).
enum class KernelOp : int {
  kLinear,
  kRmsNorm,
  kRopeRotateHalf,
  kSiluMul,
  kSwiGlu,
  kTaylorFeatureMap,
  kCausalConv1d,
  kPrefixLinearAttention,
  kWindowAttention,
  kCausalGqaAttention,
  kRatChunkAttention,
  kSsdChunkScan,
  kSampleRows,
  kTaylorLinearAttention,
};
inline constexpr int kKernelOpCount = 14;

// "linear", "rms_norm", ... (snake case of the entry point).
std::string_view KernelOpName(KernelOp op);

struct KernelOpCounts {
  int64_t device_calls = 0;
  int64_t cpu_fallbacks = 0;
};

struct KernelBackendStats {
  // Totals over every op.
  int64_t device_calls = 0;
  int64_t cpu_fallbacks = 0;
  std::array<KernelOpCounts, kKernelOpCount> per_op{};
  // Host -> device and device -> host bytes of the calls' inputs, outputs
  // and states (what a device-resident executor avoids).
  int64_t bytes_to_device = 0;
  int64_t bytes_to_host = 0;
  // One-time uploads of cached weights (not part of bytes_to_device).
  int64_t weight_bytes_to_device = 0;

  const KernelOpCounts& op(KernelOp o) const {
    return per_op[static_cast<int>(o)];
  }
};

class KernelStatsCounters {
 public:
  void Ran(KernelOp op);
  void Declined(KernelOp op);
  void CopiedToDevice(int64_t bytes);
  void CopiedToHost(int64_t bytes);
  void UploadedWeight(int64_t bytes);
  KernelBackendStats Snapshot() const;

 private:
  struct OpCounters {
    std::atomic<int64_t> device_calls{0};
    std::atomic<int64_t> cpu_fallbacks{0};
  };
  std::array<OpCounters, kKernelOpCount> ops_;
  std::atomic<int64_t> bytes_to_device_{0};
  std::atomic<int64_t> bytes_to_host_{0};
  std::atomic<int64_t> weight_bytes_to_device_{0};
};

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_KERNEL_STATS_H_
