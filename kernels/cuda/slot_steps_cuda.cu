// Slot-indexed decode steps on CUDA (CPU twins: kernels/slot_steps.h): one
// launch for every row of a batch, each row's state found through the
// row -> slot map on the device.
//
//   ConvStepSlots   thread per (row, channel): the K taps over the slot's
//                   tail and the row's input (the CPU twin's order), then
//                   the tail shifts by one row
//   SsdStepSlots    grid (H, P / warps, rows): warp per (row, head,
//                   channel p) holding that channel's N state values in
//                   registers (lanes own n = lane + 32 r), as the
//                   recurrent SsdKernel of sequence_cuda.cu with one token
//   LinearAttentionStepSlots
//                   grid (H, rows): block per (row, head):
//                   phi(q), phi(k) [D] in shared memory (the CPU map's
//                   divisors), z += phi(k) and den = phi(q) . z + eps by
//                   the block, then warp per value row e:
//                   S[e] += v_e phi(k),  y_e = phi(q) . S[e] / den
//   WindowAttentionStepSlots
//                   warp per (row, head), lanes own dims e = lane + 32 i
//                   < hd (up to four; the rest hold zeros): q, k rotated
//                   in registers (angles in double, as kernels/rope.h),
//                   the online softmax of sequence_cuda.cu's SoftmaxRow
//                   over ring rows (j mod L) of positions max(0, p-L) ..
//                   p-1 and then the token itself, and last the token's
//                   k, v into ring row p mod L. That row held position
//                   p - L, attended just before by the same lanes (each
//                   lane reads and writes only its own dims, and heads
//                   own disjoint columns), so read-then-write needs no
//                   barrier.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda::launch {
namespace {

constexpr int kSlotStepThreads = 256;
constexpr int kMaxSlotStatePerLane = 4;  // N <= 128

unsigned SlotStepBlocks(int64_t work) {
  return static_cast<unsigned>(std::min<int64_t>(
      (work + kSlotStepThreads - 1) / kSlotStepThreads, int64_t{1} << 20));
}

__global__ void ConvStepSlotsKernel(const float* x, int64_t rows,
                                    int64_t channels, int64_t x_stride,
                                    const float* w, int k, float* tails,
                                    const int32_t* slots, float* out) {
  const int64_t total = rows * channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / channels;
    const int64_t c = i % channels;
    float* tail = tails + int64_t{slots[r]} * (k - 1) * channels;
    const float xv = x[r * x_stride + c];
    float acc = 0.0f;
    for (int j = 0; j < k - 1; ++j)
      acc += w[c * k + j] * tail[j * channels + c];
    acc += w[c * k + k - 1] * xv;
    out[r * channels + c] = acc;
    for (int j = 0; j + 1 < k - 1; ++j) {
      tail[j * channels + c] = tail[(j + 1) * channels + c];
    }
    tail[int64_t{k - 2} * channels + c] = xv;
  }
}

__device__ __forceinline__ float SlotWarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void SsdStepSlotsKernel(SsdArgs a, const int32_t* slots) {
  const int warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31;
  const int h = blockIdx.x;
  const int p = blockIdx.y * warps + (threadIdx.x >> 5);
  const int64_t r = blockIdx.z;
  if (p >= a.head_dim) return;
  const int g = h / (a.heads / a.groups);
  const int per = (a.state + 31) / 32;
  const int64_t hp = int64_t{a.heads} * a.head_dim;
  const int64_t ch = int64_t{h} * a.head_dim + p;
  float* s = a.ssm_state + int64_t{slots[r]} * hp * a.state + ch * a.state;
  const float dt = a.dt[r * a.heads + h];
  const float x = a.x[r * a.x_stride + ch];
  // expf, not __expf: the decay compounds in the state over every step
  // (__expf is ~11 ulp off at dt·A = -8), and the CPU uses std::exp.
  const float decay = expf(dt * a.a[h]);
  const float* bt = a.b + r * a.bc_stride + int64_t{g} * a.state;
  const float* ct = a.c + r * a.bc_stride + int64_t{g} * a.state;
  float dot = 0.0f;
  for (int i = 0; i < per && i < kMaxSlotStatePerLane; ++i) {
    const int n = lane + 32 * i;
    if (n < a.state) {
      const float v = decay * s[n] + dt * x * bt[n];
      s[n] = v;
      dot += v * ct[n];
    }
  }
  dot = SlotWarpSum(dot);
  if (lane == 0) a.y[r * hp + ch] = dot + a.d[h] * x;
}

// grid (H, rows), dynamic shared memory [2 D + warps] floats.
__global__ void LinearAttentionStepSlotsKernel(const float* q, const float* k,
                                               const float* v, int heads,
                                               int hd, int f, float eps,
                                               float* kv_states,
                                               float* k_states,
                                               const int32_t* slots, float* y) {
  extern __shared__ float la_features[];
  const int d = 1 + f + f * f;
  float* pq = la_features;
  float* pk = la_features + d;
  float* red = la_features + 2 * d;  // [warps]
  const int h = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int64_t rh = r * heads + h;  // head of q, k, v, y
  // Head of the state; no slot map: row r's state is slot r.
  const int64_t sh = (slots != nullptr ? int64_t{slots[r]} : r) * heads + h;
  const float* qr = q + rh * f;
  const float* kr = k + rh * f;
  // Divisors as the CPU map (kernels/cpu TaylorRows) writes them.
  const float rd = sqrtf(sqrtf(static_cast<float>(f)));
  const float rrd = sqrtf(2.0f) * sqrtf(static_cast<float>(f));
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    if (m == 0) {
      pq[m] = 1.0f;
      pk[m] = 1.0f;
    } else if (m <= f) {
      pq[m] = qr[m - 1] / rd;
      pk[m] = kr[m - 1] / rd;
    } else {
      const int j = m - 1 - f;
      pq[m] = qr[j / f] * qr[j % f] / rrd;
      pk[m] = kr[j / f] * kr[j % f] / rrd;
    }
  }
  __syncthreads();
  float* z = k_states + sh * d;
  float part = 0.0f;
  for (int m = threadIdx.x; m < d; m += blockDim.x) {
    const float zm = z[m] + pk[m];
    z[m] = zm;
    part += pq[m] * zm;
  }
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  part = SlotWarpSum(part);
  if (lane == 0) red[warp] = part;
  __syncthreads();
  float den = 0.0f;
  for (int w = 0; w < warps; ++w) den += red[w];
  float* s = kv_states + sh * hd * d;
  const float* vr = v + rh * hd;
  float* yr = y + rh * hd;
  for (int e = warp; e < hd; e += warps) {
    float* se = s + int64_t{e} * d;
    const float ve = vr[e];
    float num = 0.0f;
    for (int m = lane; m < d; m += 32) {
      const float sv = se[m] + ve * pk[m];
      se[m] = sv;
      num += pq[m] * sv;
    }
    num = SlotWarpSum(num);
    if (lane == 0) yr[e] = num / (den + eps);
  }
}

constexpr int kWindowDimsPerLane = 4;  // head_dim <= 128

// Warps loop over the (row, head) pairs by the grid's warp count; the loop
// bounds are the same for all lanes of a warp, so the shuffles stay
// convergent.
__global__ void WindowStepSlotsKernel(WindowStepArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int hd = a.head_dim;
  const int half = hd / 2;
  const int64_t width = int64_t{a.heads} * hd;
  for (int64_t w = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) >> 5;
       w < a.rows * a.heads; w += warps) {
    const int64_t r = w / a.heads;
    const int64_t off = (w % a.heads) * hd;
    const int64_t p = a.positions[r];
    const float* q_in = a.qkv + r * a.qkv_stride + off;
    const float* k_in = q_in + width;
    const float* v_in = k_in + width;
    const int64_t slot = int64_t{a.slots[r]} * a.window * width + off;
    float* ring_k = a.ring_k + slot;  // + j · width: ring row j, this head
    float* ring_v = a.ring_v + slot;
    float q[kWindowDimsPerLane];
    float k[kWindowDimsPerLane];
    float v[kWindowDimsPerLane];
    float acc[kWindowDimsPerLane];
#pragma unroll
    for (int i = 0; i < kWindowDimsPerLane; ++i) {
      const int e = lane + 32 * i;
      q[i] = k[i] = v[i] = acc[i] = 0.0f;
      if (e < hd) {
        // Rotate-half: dims f and f + half turn by p · base^(-2f / hd).
        const bool low = e < half;
        const int f = low ? e : e - half;
        const int partner = low ? e + half : e - half;
        const double inv_freq = pow(static_cast<double>(a.rotary_base),
                                    -2.0 * f / static_cast<double>(hd));
        double sin_d;
        double cos_d;
        sincos(static_cast<double>(p) * inv_freq, &sin_d, &cos_d);
        const float c = static_cast<float>(cos_d);
        const float sn = static_cast<float>(sin_d);
        if (low) {  // x1 c - x2 s
          q[i] = q_in[e] * c - q_in[partner] * sn;
          k[i] = k_in[e] * c - k_in[partner] * sn;
        } else {  // x2 c + x1 s
          q[i] = q_in[e] * c + q_in[partner] * sn;
          k[i] = k_in[e] * c + k_in[partner] * sn;
        }
        v[i] = v_in[e];
      }
    }
    float m = -FLT_MAX;
    float l = 0.0f;
    auto visit = [&](const float(&kr)[kWindowDimsPerLane],
                     const float(&vr)[kWindowDimsPerLane]) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kWindowDimsPerLane; ++i) dot += q[i] * kr[i];
      const float sc = SlotWarpSum(dot) * a.scale;
      const float m_new = fmaxf(m, sc);
      const float corr = __expf(m - m_new);
      const float pr = __expf(sc - m_new);
      l = l * corr + pr;
#pragma unroll
      for (int i = 0; i < kWindowDimsPerLane; ++i) {
        acc[i] = acc[i] * corr + pr * vr[i];
      }
      m = m_new;
    };
    const int64_t past = p < a.window ? p : a.window;
    for (int64_t j = p - past; j < p; ++j) {
      const int64_t row = (j % a.window) * width;
      float kr[kWindowDimsPerLane];
      float vr[kWindowDimsPerLane];
#pragma unroll
      for (int i = 0; i < kWindowDimsPerLane; ++i) {
        const int e = lane + 32 * i;
        kr[i] = e < hd ? ring_k[row + e] : 0.0f;
        vr[i] = e < hd ? ring_v[row + e] : 0.0f;
      }
      visit(kr, vr);
    }
    visit(k, v);
    const float inv = 1.0f / l;  // l >= 1: the maximum's own term
    float* yr = a.y + r * width + off;
    const int64_t row = (p % a.window) * width;
#pragma unroll
    for (int i = 0; i < kWindowDimsPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < hd) {
        yr[e] = acc[i] * inv;
        ring_k[row + e] = k[i];
        ring_v[row + e] = v[i];
      }
    }
  }
}

}  // namespace

cudaError_t ConvStepSlots(const float* x, int64_t rows, int64_t channels,
                          int64_t x_stride, const float* w, int kernel_size,
                          float* tails, const int32_t* slots, float* out,
                          cudaStream_t stream) {
  ConvStepSlotsKernel<<<SlotStepBlocks(rows * channels), kSlotStepThreads, 0,
                        stream>>>(x, rows, channels, x_stride, w, kernel_size,
                                  tails, slots, out);
  return cudaGetLastError();
}

cudaError_t SsdStepSlots(const SsdArgs& args, int64_t rows,
                         const int32_t* slots, cudaStream_t stream) {
  const int warps = kSlotStepThreads / 32;
  const dim3 grid(static_cast<unsigned>(args.heads),
                  static_cast<unsigned>((args.head_dim + warps - 1) / warps),
                  static_cast<unsigned>(rows));
  SsdStepSlotsKernel<<<grid, kSlotStepThreads, 0, stream>>>(args, slots);
  return cudaGetLastError();
}

cudaError_t LinearAttentionStepSlots(const float* q, const float* k,
                                     const float* v, int64_t rows, int heads,
                                     int head_dim, int feature_dim, float eps,
                                     float* kv_states, float* k_states,
                                     const int32_t* slots, float* y,
                                     cudaStream_t stream) {
  const int d = 1 + feature_dim + feature_dim * feature_dim;
  // D <= 4161 (F <= 64): at most 33 KiB, under the default 48 KiB.
  const size_t smem =
      (2 * static_cast<size_t>(d) + kSlotStepThreads / 32) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(rows));
  LinearAttentionStepSlotsKernel<<<grid, kSlotStepThreads, smem, stream>>>(
      q, k, v, heads, head_dim, feature_dim, eps, kv_states, k_states, slots,
      y);
  return cudaGetLastError();
}

cudaError_t WindowAttentionStepSlots(const WindowStepArgs& args,
                                     cudaStream_t stream) {
  WindowStepSlotsKernel<<<SlotStepBlocks(args.rows * args.heads * 32),
                          kSlotStepThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace twice::kernels::cuda::launch
