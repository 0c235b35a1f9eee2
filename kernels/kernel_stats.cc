#include "kernels/kernel_stats.h"

namespace twice::kernels {

std::string_view KernelOpName(KernelOp op) {
  switch (op) {
    case KernelOp::kLinear:
      return "linear";
    case KernelOp::kRmsNorm:
      return "rms_norm";
    case KernelOp::kRopeRotateHalf:
      return "rope_rotate_half";
    case KernelOp::kSiluMul:
      return "silu_mul";
    case KernelOp::kSwiGlu:
      return "swiglu";
    case KernelOp::kTaylorFeatureMap:
      return "taylor_feature_map";
    case KernelOp::kCausalConv1d:
      return "causal_conv1d";
    case KernelOp::kPrefixLinearAttention:
      return "prefix_linear_attention";
    case KernelOp::kWindowAttention:
      return "window_attention";
    case KernelOp::kCausalGqaAttention:
      return "causal_gqa_attention";
    case KernelOp::kRatChunkAttention:
      return "rat_chunk_attention";
    case KernelOp::kSsdChunkScan:
      return "ssd_chunk_scan";
    case KernelOp::kSampleRows:
      return "sample_rows";
    case KernelOp::kTaylorLinearAttention:
      return "taylor_linear_attention";
  }
  return "unknown";
}

void KernelStatsCounters::Ran(KernelOp op) {
  ops_[static_cast<int>(op)].device_calls.fetch_add(1,
                                                    std::memory_order_relaxed);
}

void KernelStatsCounters::Declined(KernelOp op) {
  ops_[static_cast<int>(op)].cpu_fallbacks.fetch_add(1,
                                                     std::memory_order_relaxed);
}

void KernelStatsCounters::CopiedToDevice(int64_t bytes) {
  bytes_to_device_.fetch_add(bytes, std::memory_order_relaxed);
}

void KernelStatsCounters::CopiedToHost(int64_t bytes) {
  bytes_to_host_.fetch_add(bytes, std::memory_order_relaxed);
}

void KernelStatsCounters::UploadedWeight(int64_t bytes) {
  weight_bytes_to_device_.fetch_add(bytes, std::memory_order_relaxed);
}

KernelBackendStats KernelStatsCounters::Snapshot() const {
  KernelBackendStats stats;
  for (int i = 0; i < kKernelOpCount; ++i) {
    KernelOpCounts& counts = stats.per_op[i];
    counts.device_calls = ops_[i].device_calls.load(std::memory_order_relaxed);
    counts.cpu_fallbacks =
        ops_[i].cpu_fallbacks.load(std::memory_order_relaxed);
    stats.device_calls += counts.device_calls;
    stats.cpu_fallbacks += counts.cpu_fallbacks;
  }
  stats.bytes_to_device = bytes_to_device_.load(std::memory_order_relaxed);
  stats.bytes_to_host = bytes_to_host_.load(std::memory_order_relaxed);
  stats.weight_bytes_to_device =
      weight_bytes_to_device_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace twice::kernels
