// CPU implementation behind kernels/ssd_chunk_scan.h (equations and layouts
// are documented there). Internal to twice_kernels; the entry points have
// checked every size. Kept apart from cpu_kernels.h so the SSD kernels
// evolve on their own.
#ifndef TWICE_KERNELS_CPU_SSD_CHUNK_SCAN_CPU_H_
#define TWICE_KERNELS_CPU_SSD_CHUNK_SCAN_CPU_H_

#include <cstdint>

namespace twice::kernels::cpu {

void SsdChunkScan(int64_t heads, int64_t head_dim, int64_t groups,
                  int64_t state_dim, int64_t tokens, int64_t chunk,
                  const float* x, int64_t x_stride, const float* b,
                  const float* c, int64_t bc_stride, const float* dt,
                  const float* a, const float* d, float* state, float* y);

void SsdStep(int64_t heads, int64_t head_dim, int64_t groups, int64_t state_dim,
             const float* x, const float* b, const float* c, const float* dt,
             const float* a, const float* d, float* state, float* y);

}  // namespace twice::kernels::cpu

#endif  // TWICE_KERNELS_CPU_SSD_CHUNK_SCAN_CPU_H_
