// wmma for the CPU replay of the CUDA kernels (../cuda_replay.h): found
// before the toolkit's <mma.h> on the replay's include path. A fragment
// holds its whole tile in every lane (element (r, c) at x[r * cols + c]),
// so each lane computes the whole product; a store writes only the
// elements e with e % 32 == lane, as if the lanes' registers were spread
// over the tile, so reading another lane's part needs the __syncwarp the
// device needs. Inputs are read as the tensor cores read them (TF32: the
// top 19 bits; bf16 as is), the products are exact in f32 and summed in
// f32 in k order.
#ifndef TWICE_TESTS_CUDA_REPLAY_INCLUDE_MMA_H_
#define TWICE_TESTS_CUDA_REPLAY_INCLUDE_MMA_H_

#include <cuda_bf16.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tests/cuda_replay/cuda_replay.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

namespace replay_detail {
template <typename T>
struct Element {
  using type = T;
};
template <>
struct Element<precision::tf32> {
  using type = float;
};
template <typename Use, int M, int N, int K>
struct Shape;
template <int M, int N, int K>
struct Shape<matrix_a, M, N, K> {
  static constexpr int kRows = M, kCols = K;
};
template <int M, int N, int K>
struct Shape<matrix_b, M, N, K> {
  static constexpr int kRows = K, kCols = N;
};
template <int M, int N, int K>
struct Shape<accumulator, M, N, K> {
  static constexpr int kRows = M, kCols = N;
};
inline float AsInput(float x) {  // TF32: the tensor cores drop 13 bits
  return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xFFFFE000u);
}
inline float AsInput(__nv_bfloat16 x) { return __bfloat162float(x); }
// What the device requires of every load and store: a 256-bit aligned
// pointer and a leading dimension of a multiple of 16 bytes.
template <typename P>
void CheckOperand(const P* p, unsigned ldm) {
  ::twice::cuda_replay::Require(reinterpret_cast<uintptr_t>(p) % 32 == 0,
                                "a wmma pointer is not 32-byte aligned");
  ::twice::cuda_replay::Require(ldm * sizeof(P) % 16 == 0,
                                "a wmma leading dimension is not a multiple "
                                "of 16 bytes");
}
}  // namespace replay_detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int kRows = replay_detail::Shape<Use, M, N, K>::kRows;
  static constexpr int kCols = replay_detail::Shape<Use, M, N, K>::kCols;
  static constexpr int num_elements = kRows * kCols;
  using element_type = typename replay_detail::Element<T>::type;
  element_type x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, V value) {
  for (auto& e : f.x)
    e = static_cast<typename fragment<Use, M, N, K, T, L>::element_type>(value);
}

template <typename Use, int M, int N, int K, typename T, typename L, typename P>
void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p,
                      unsigned ldm) {
  static_assert(std::is_same_v<L, row_major> || std::is_same_v<L, col_major>);
  using F = fragment<Use, M, N, K, T, L>;
  replay_detail::CheckOperand(p, ldm);
  for (int r = 0; r < F::kRows; ++r) {
    for (int c = 0; c < F::kCols; ++c) {
      f.x[r * F::kCols + c] =
          std::is_same_v<L, row_major> ? p[r * ldm + c] : p[c * ldm + r];
    }
  }
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p,
                      unsigned ldm, layout_t layout) {
  replay_detail::CheckOperand(p, ldm);
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      f.x[r * N + c] =
          layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
    }
  }
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f,
                       unsigned ldm, layout_t layout) {
  replay_detail::CheckOperand(p, ldm);
  const int lane = ::twice::cuda_replay::LaneId();
  for (int e = lane; e < M * N; e += 32) {
    const int r = e / N, c = e % N;
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
  }
}

template <int M, int N, int K, typename TA, typename LA, typename TB,
          typename LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d,
              const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  float out[M * N];
  for (int r = 0; r < M; ++r) {
    for (int col = 0; col < N; ++col) {
      float sum = c.x[r * N + col];
      for (int k = 0; k < K; ++k) {
        sum += replay_detail::AsInput(a.x[r * K + k]) *
               replay_detail::AsInput(b.x[k * N + col]);
      }
      out[r * N + col] = sum;
    }
  }
  for (int e = 0; e < M * N; ++e) d.x[e] = out[e];
}

// cvt.rna.tf32.f32: to nearest, ties away from zero.
inline float __float_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  return std::bit_cast<float>((std::bit_cast<uint32_t>(x) + 0x1000u) &
                              0xFFFFE000u);
}

}  // namespace nvcuda::wmma

#endif  // TWICE_TESTS_CUDA_REPLAY_INCLUDE_MMA_H_
