// CPU implementation behind kernels/prefix_linear_attention.h. Internal to
// twice_kernels; the entry point has checked every size. Kept apart from
// cpu_kernels.h so the prefix kernel evolves on its own.
#ifndef TWICE_KERNELS_CPU_PREFIX_LINEAR_ATTENTION_CPU_H_
#define TWICE_KERNELS_CPU_PREFIX_LINEAR_ATTENTION_CPU_H_

#include <cstdint>

namespace twice::kernels::cpu {

void PrefixLinearAttentionPrefill(const float* phi_q, const float* phi_k,
                                  const float* v, int64_t tokens,
                                  const float* phi_k_enc, const float* v_enc,
                                  int64_t encoder_tokens, int64_t heads,
                                  int64_t head_dim, int64_t feature_size,
                                  float eps, float* kv_state, float* k_state,
                                  float* y);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_PREFIX_LINEAR_ATTENTION_CPU_H_
