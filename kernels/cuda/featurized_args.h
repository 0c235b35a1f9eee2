// The raw launch arguments of the featurized linear-attention kernels
// (launch.h FeaturizedLinearAttentionArgs) from the validated device spans
// of cuda_ops.h. Internal to twice_kernels_cuda.
#ifndef TWICE_KERNELS_CUDA_FEATURIZED_ARGS_H_
#define TWICE_KERNELS_CUDA_FEATURIZED_ARGS_H_

#include <cstdint>

#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/launch.h"
#include "kernels/linear_attention.h"

namespace twice::kernels::cuda {

// `tokens` rows of phi_q, phi_k, v and y; `encoder_tokens` of phi_k_enc
// and v_enc (empty spans for none).
inline launch::FeaturizedLinearAttentionArgs MakeFeaturizedArgs(
    DeviceSpan<const float> phi_q, DeviceSpan<const float> phi_k,
    DeviceSpan<const float> v, int64_t tokens,
    DeviceSpan<const float> phi_k_enc, DeviceSpan<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& d, float eps,
    DeviceSpan<float> kv_state, DeviceSpan<float> k_state,
    DeviceSpan<float> y) {
  launch::FeaturizedLinearAttentionArgs args;
  args.phi_q = phi_q.data;
  args.phi_k = phi_k.data;
  args.v = v.data;
  args.phi_k_enc = phi_k_enc.data;
  args.v_enc = v_enc.data;
  args.tokens = tokens;
  args.encoder_tokens = encoder_tokens;
  args.heads = static_cast<int>(d.heads);
  args.head_dim = static_cast<int>(d.head_dim);
  args.feature_width = static_cast<int>(d.feature_size);
  args.eps = eps;
  args.kv_state = kv_state.data;
  args.k_state = k_state.data;
  args.y = y.data;
  return args;
}

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_FEATURIZED_ARGS_H_
