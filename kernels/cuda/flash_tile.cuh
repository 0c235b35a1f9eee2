// FlashTile: the tensor-core core of the flash-style causal attention
// kernels (sequence_cuda.cu's bf16 baseline over contiguous rows,
// paged_flash_prefill_cuda.cu's prefill over the paged KV cache): a block of
// kFlashRows query rows, 4 warps of 16, walking the keys in tiles of
// kFlashKeys. Per tile, once the block has staged the tile's keys and values
// (bf16, [kFlashKeys][HD]) in k and v, each warp updates its rows:
//   S = Q_w K^T (wmma 16x16x16, f32 accumulation) into s,
//   the online softmax per row on the CUDA cores (running max m and sum l;
//   lanes own keys lane and lane + 32; keys a row does not see weigh 0),
//   the weights P (bf16) into p, O rescaled by e^{m_old - m_new},
//   O += P_w V (wmma), O kept in shared memory in f32.
// The caller stages Q (bf16 [kFlashRows][HD]) before its first tile and
// reads row i's output as o[i · HD + e] / l[i].
#ifndef TWICE_KERNELS_CUDA_FLASH_TILE_CUH_
#define TWICE_KERNELS_CUDA_FLASH_TILE_CUH_

#include <cuda_bf16.h>
#include <mma.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/warp_softmax_row.cuh"

namespace twice::kernels::cuda::launch {

inline constexpr int kFlashRows = 64;  // query rows per block
inline constexpr int kFlashKeys = 64;  // positions per tile
inline constexpr int kFlashWarps = kFlashRows / 16;

template <int HD>
class FlashTile {
 public:
  using bf16 = __nv_bfloat16;
  // Byte offsets in the block's shared memory; every region starts on a
  // multiple of 2 KiB, so each fragment pointer is 32-byte aligned.
  static constexpr int kQ = 0;                                 // [rows][HD]
  static constexpr int kK = kQ + kFlashRows * HD * 2;          // [keys][HD]
  static constexpr int kV = kK + kFlashKeys * HD * 2;          // [keys][HD]
  static constexpr int kP = kV + kFlashKeys * HD * 2;          // [rows][keys]
  static constexpr int kS = kP + kFlashRows * kFlashKeys * 2;  // f32
  static constexpr int kO = kS + kFlashRows * kFlashKeys * 4;  // f32
  static constexpr int kM = kO + kFlashRows * HD * 4;          // f32 m, l
  static constexpr int kBytes = kM + 2 * kFlashRows * 4;

  __device__ explicit FlashTile(unsigned char* smem)
      : q(reinterpret_cast<bf16*>(smem + kQ)),
        k(reinterpret_cast<bf16*>(smem + kK)),
        v(reinterpret_cast<bf16*>(smem + kV)),
        p(reinterpret_cast<bf16*>(smem + kP)),
        s(reinterpret_cast<float*>(smem + kS)),
        o(reinterpret_cast<float*>(smem + kO)),
        m(reinterpret_cast<float*>(smem + kM)),
        l(m + kFlashRows) {}

  // O, m and l of a block that has seen no key; the whole block calls it.
  __device__ void Reset() {
    for (int i = threadIdx.x; i < kFlashRows * HD; i += blockDim.x) o[i] = 0;
    for (int i = threadIdx.x; i < kFlashRows; i += blockDim.x) {
      m[i] = -FLT_MAX;
      l[i] = 0.0f;
    }
  }

  // One staged tile of positions k0 .. k0 + kFlashKeys - 1 for this warp's
  // rows r0 .. r0 + 15; sees(i, pos): whether row i attends position pos
  // (the same for every lane).
  template <typename Sees>
  __device__ void Update(int r0, int64_t k0, float scale, Sees sees) {
    namespace wmma = nvcuda::wmma;
    const int lane = threadIdx.x & 31;
    // K rows are K^T's columns: column-major with ld HD.
    for (int tj = 0; tj < kFlashKeys / 16; ++tj) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int e0 = 0; e0 < HD; e0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, q + r0 * HD + e0, HD);
        wmma::load_matrix_sync(fb, k + tj * 16 * HD + e0, HD);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(s + r0 * kFlashKeys + tj * 16, acc, kFlashKeys,
                              wmma::mem_row_major);
    }
    __syncwarp();
    for (int rr = 0; rr < 16; ++rr) {
      const int i = r0 + rr;
      float sc[2];
      float mx = -FLT_MAX;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int j = lane + 32 * c;
        sc[c] = sees(i, k0 + j) ? s[i * kFlashKeys + j] * scale : -FLT_MAX;
        mx = fmaxf(mx, sc[c]);
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      }
      const float m_old = m[i];
      const float m_new = fmaxf(m_old, mx);
      float psum = 0.0f;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float w = sc[c] == -FLT_MAX ? 0.0f : __expf(sc[c] - m_new);
        psum += w;
        p[i * kFlashKeys + lane + 32 * c] = __float2bfloat16(w);
      }
      psum = WarpSum(psum);
      const float corr = m_old == -FLT_MAX ? 0.0f : __expf(m_old - m_new);
      for (int e = lane; e < HD; e += 32) o[i * HD + e] *= corr;
      __syncwarp();  // every lane read m[i] before lane 0 writes it
      if (lane == 0) {
        m[i] = m_new;
        l[i] = l[i] * corr + psum;
      }
    }
    __syncwarp();
    for (int tj = 0; tj < HD / 16; ++tj) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o + r0 * HD + tj * 16, HD,
                             wmma::mem_row_major);
#pragma unroll
      for (int j0 = 0; j0 < kFlashKeys; j0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, p + r0 * kFlashKeys + j0, kFlashKeys);
        wmma::load_matrix_sync(fb, v + j0 * HD + tj * 16, HD);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(o + r0 * HD + tj * 16, acc, HD,
                              wmma::mem_row_major);
    }
    __syncwarp();
  }

  // Row i's output dim e (0 for a row that saw no key).
  __device__ float Out(int i, int e) const {
    return l[i] > 0.0f ? o[i * HD + e] / l[i] : 0.0f;
  }

  bf16* const q;
  bf16* const k;
  bf16* const v;
  bf16* const p;
  float* const s;
  float* const o;
  float* const m;
  float* const l;
};

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_FLASH_TILE_CUH_
