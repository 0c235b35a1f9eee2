// CPU implementations behind the kernels/ entry points. Internal to
// twice_kernels: callers use the validating entry points in kernels/*.h,
// which have checked every size, so these index without bounds checks.
// Equations and layouts are documented on the entry points.
#ifndef TWICE_KERNELS_CPU_CPU_KERNELS_H_
#define TWICE_KERNELS_CPU_CPU_KERNELS_H_

#include <cstdint>

#include "kernels/cpu/lowp_dot.h"
#include "kernels/sampling.h"

namespace twice::kernels::cpu {

void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
            const float* bias, float* y);
// Linear on the calling thread for W = `rows` f32 rows [rows, k], writing
// y[i * ldy + c] for c < rows (+ bias[c]): a block of a larger product.
void LinearPanelF32(const float* x, int64_t m, int64_t k, const float* w,
                    int64_t rows, int64_t ldy, const float* bias, float* y);
// Linear with W in bf16 / f16 / int8 (lowp_dot.h), f32 x, y and bias.
void LinearLowp(const float* x, int64_t m, const LowpRows& w, int64_t n,
                const float* bias, float* y);

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* w,
             float eps, float* y);

void SiluMul(const float* gate, int64_t gate_stride, const float* mult,
             int64_t mult_stride, int64_t rows, int64_t cols, float* out);

void RopeRotateHalf(float* x, int64_t rows, int64_t row_stride, int64_t heads,
                    int64_t head_dim, int64_t start_pos, float base);

void TaylorFeatureMap(const float* x, int64_t rows, int64_t feature_dim,
                      float* out);

void LinearAttentionPrefill(const float* phi_q, const float* phi_k,
                            const float* v, int64_t tokens, int64_t heads,
                            int64_t head_dim, int64_t feature_size, float eps,
                            float* kv_state, float* k_state, float* y);

void LinearAttentionStep(const float* phi_q, const float* phi_k, const float* v,
                         int64_t heads, int64_t head_dim, int64_t feature_size,
                         float eps, float* kv_state, float* k_state, float* y);

void CausalConv1d(const float* x, int64_t tokens, int64_t channels,
                  int64_t x_stride, const float* w, int64_t kernel_size,
                  float* tail, float* out);

void WindowAttention(const float* q, int64_t q_stride, const float* k,
                     const float* v, int64_t tokens, int64_t past,
                     int64_t heads, int64_t head_dim, int64_t window,
                     float scale, float* out);

// One row of SampleRows: `logits` holds at least `vocab` values.
int32_t SampleRow(const float* logits, int64_t vocab, const SamplingRule& rule);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_CPU_KERNELS_H_
