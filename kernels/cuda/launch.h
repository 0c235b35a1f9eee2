// Raw kernel launchers of twice_kernels_cuda. Internal: callers use the
// validating functions of kernels/cuda/cuda_ops.h, which check every size
// and argument first, so these index without bounds checks. Each returns
// the launch error (cudaGetLastError) and queues work on `stream`.
// Pointers are device pointers; bf16 data is passed as uint16_t bits.
// Equations and layouts are documented in cuda_ops.h.
#ifndef TWICE_KERNELS_CUDA_LAUNCH_H_
#define TWICE_KERNELS_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace twice::kernels::cuda::launch {

using bf16_bits = uint16_t;

// ---- Based / JRT (based_cuda.cu) --------------------------------------------
constexpr int kTaylorF = 16;  // feature_dim of the fused kernels

struct LinearAttentionArgs {
  const bf16_bits* q = nullptr;      // [B, T, H, F]
  const bf16_bits* k = nullptr;      // [B, T, H, F]
  const bf16_bits* v = nullptr;      // [B, T, H, hd]
  const bf16_bits* k_enc = nullptr;  // [B, E, H, F]
  const bf16_bits* v_enc = nullptr;  // [B, E, H, hd]
  int64_t batch = 0;
  int64_t tokens = 0;
  int64_t encoder_tokens = 0;
  int heads = 0;
  int head_dim = 0;
  float eps = 0.0f;
  float* kv_state = nullptr;  // [B, H, hd, D]
  float* k_state = nullptr;   // [B, H, D]
  bf16_bits* y = nullptr;     // [B, T, H, hd]
};
cudaError_t LinearAttentionPrefill(const LinearAttentionArgs& args,
                                   cudaStream_t stream);
// The dynamic shared memory one block of LinearAttentionPrefill takes.
int LinearAttentionPrefillSharedBytes();

cudaError_t TaylorFeatureMap(const float* x, int64_t rows, int feature_dim,
                             float* out, cudaStream_t stream);

// q, k [B, H, F] raw (feature map fused), v, y [B, H, hd].
cudaError_t LinearAttentionStep(const float* q, const float* k, const float* v,
                                int64_t batch, int heads, int head_dim,
                                int feature_dim, float eps, float* kv_state,
                                float* k_state, float* y, cudaStream_t stream);

// Featurized causal linear attention with an optional non-causal encoder
// fold, f32 (featurized_linear_attention.cu); D <= kMaxFeatureWidth,
// heads and head_dim <= 65535.
constexpr int kMaxFeatureWidth = 2048;
struct FeaturizedLinearAttentionArgs {
  const float* phi_q = nullptr;      // [T, H, D]
  const float* phi_k = nullptr;      // [T, H, D]
  const float* v = nullptr;          // [T, H, hd]
  const float* phi_k_enc = nullptr;  // [E, H, D]
  const float* v_enc = nullptr;      // [E, H, hd]
  int64_t tokens = 0;
  int64_t encoder_tokens = 0;
  int heads = 0;
  int head_dim = 0;
  int feature_width = 0;  // D
  float eps = 0.0f;
  float* kv_state = nullptr;  // [H, hd, D]
  float* k_state = nullptr;   // [H, D]
  float* y = nullptr;         // [T, H, hd]
};
cudaError_t FeaturizedLinearAttention(const FeaturizedLinearAttentionArgs& args,
                                      cudaStream_t stream);

// ---- sequence mixers (sequence_cuda.cu) -------------------------------------
cudaError_t CausalConv1d(const float* x, int64_t tokens, int64_t channels,
                         int64_t x_stride, const float* w, int kernel_size,
                         float* tail, float* out, cudaStream_t stream);
// One sequence of a prefill pass of several: its rows [first_row,
// first_row + rows) of the pass, the slot whose state it continues and the
// position of its first row in its sequence.
struct PassSegment {
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t slot = 0;
  int64_t start = 0;
};
// CausalConv1d of each of `count` (<= 65535) segments (device array) in one
// launch: x and out are the pass's rows, tails the [slots, k - 1, channels]
// pool; max_rows >= every segment's rows.
cudaError_t CausalConv1dSegments(const float* x, int64_t channels,
                                 int64_t x_stride, const float* w,
                                 int kernel_size, float* tails,
                                 const PassSegment* segments, int count,
                                 int64_t max_rows, float* out,
                                 cudaStream_t stream);
// FeaturizedLinearAttention (no encoder: args.tokens and the inputs are the
// pass's rows) of each of `count` (<= 65535) segments with its slot's
// state of args.kv_state [slots, H, hd, D] and args.k_state [slots, H, D],
// in one launch (linear_attention_segments_cuda.cu); hd <=
// kMaxSegmentHeadDim and D <= kMaxSegmentFeatureWidth (a block keeps a
// head's whole state in registers).
constexpr int kMaxSegmentHeadDim = 64;
constexpr int kMaxSegmentFeatureWidth = 288;
cudaError_t LinearAttentionSegments(const FeaturizedLinearAttentionArgs& args,
                                    const PassSegment* segments, int count,
                                    cudaStream_t stream);

// Softmax attention of rows: query i at context index past + i sees context
// indices [lo_i, past + i] with lo_i = window < 0 ? 0 : max(0, past+i-window);
// query head h reads kv head h / group.
struct SoftmaxAttentionArgs {
  const float* q = nullptr;
  int64_t q_stride = 0;
  const float* k = nullptr;  // [past + T, H_kv, hd]
  const float* v = nullptr;
  int64_t tokens = 0;
  int64_t past = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int64_t window = -1;
  float scale = 1.0f;
  float* out = nullptr;  // [T, H, hd]
};
// Passes of kSoftmaxTileMinRows rows or more (and at most 65535 heads) run
// SoftmaxAttentionTiles.
cudaError_t SoftmaxAttention(const SoftmaxAttentionArgs& args,
                             cudaStream_t stream);
// Block per 16 query rows and head, keys staged in shared memory
// (softmax_tiles_cuda.cu); head_dim <= 128, heads <= 65535.
inline constexpr int64_t kSoftmaxTileMinRows = 16;
cudaError_t SoftmaxAttentionTiles(const SoftmaxAttentionArgs& args,
                                  cudaStream_t stream);

struct RatAttentionArgs {
  const float* q = nullptr;
  int64_t q_stride = 0;
  const float* own_k = nullptr;
  int64_t own_k_stride = 0;
  const float* own_v = nullptr;
  int64_t own_v_stride = 0;
  const float* chunk_k = nullptr;
  int64_t chunk_k_stride = 0;
  const float* chunk_v = nullptr;
  int64_t chunk_v_stride = 0;
  const int64_t* visible = nullptr;  // [T]
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [T, H, hd]
};
cudaError_t RatChunkAttention(const RatAttentionArgs& args,
                              cudaStream_t stream);

struct SsdArgs {
  int heads = 0;
  int head_dim = 0;
  int groups = 0;
  int state = 0;
  int64_t tokens = 0;
  const float* x = nullptr;
  int64_t x_stride = 0;
  const float* b = nullptr;
  const float* c = nullptr;
  int64_t bc_stride = 0;
  const float* dt = nullptr;   // [T, H]
  const float* a = nullptr;    // [H]
  const float* d = nullptr;    // [H]
  float* ssm_state = nullptr;  // [H, P, N]
  float* y = nullptr;          // [T, H·P]
};
cudaError_t SsdScan(const SsdArgs& args, cudaStream_t stream);
// SsdScan of each of `count` (<= 65535) segments in one launch: x, b, c,
// dt and y are the pass's rows (args.tokens unused), args.ssm_state the
// [slots, H, P, N] pool; N <= 128.
cudaError_t SsdScanSegments(const SsdArgs& args, const PassSegment* segments,
                            int count, cudaStream_t stream);
// Slot-indexed decode steps (slot_steps_cuda.cu): row r uses the state of
// slot slots[r]. SsdStepSlots reads args as one token per row (args.tokens
// unused; ssm_state is the [capacity, H, P, N] pool); rows <= 65535,
// N <= 128.
cudaError_t ConvStepSlots(const float* x, int64_t rows, int64_t channels,
                          int64_t x_stride, const float* w, int kernel_size,
                          float* tails, const int32_t* slots, float* out,
                          cudaStream_t stream);
cudaError_t SsdStepSlots(const SsdArgs& args, int64_t rows,
                         const int32_t* slots, cudaStream_t stream);
// Based's step: q, k [rows, H, F] raw (feature map fused), v, y
// [rows, H, hd]; kv_states [capacity, H, hd, D], k_states [capacity, H, D];
// D = 1 + F + F^2 <= 2048 (F <= 44; the wrapper checks it), rows <=
// 65535; slots null: row r updates state r (LinearAttentionStep).
cudaError_t LinearAttentionStepSlots(const float* q, const float* k,
                                     const float* v, int64_t rows, int heads,
                                     int head_dim, int feature_dim, float eps,
                                     float* kv_states, float* k_states,
                                     const int32_t* slots, float* y,
                                     cudaStream_t stream);
// Sliding-window attention step with its ring (kernels/slot_steps.h
// WindowAttentionStepSlots); head_dim even and <= 128.
struct WindowStepArgs {
  const float* qkv = nullptr;  // [rows, 3·H·hd] q | k | v
  int64_t qkv_stride = 0;
  const int64_t* positions = nullptr;  // [rows], >= 0
  const int32_t* slots = nullptr;      // [rows]
  int64_t rows = 0;
  int heads = 0;
  int head_dim = 0;
  int64_t window = 0;  // L, ring rows per slot
  float rotary_base = 0.0f;
  float scale = 1.0f;
  float* ring_k = nullptr;  // [capacity, L, H, hd]
  float* ring_v = nullptr;  // [capacity, L, H, hd]
  float* y = nullptr;       // [rows, H·hd]
};
cudaError_t WindowAttentionStepSlots(const WindowStepArgs& args,
                                     cudaStream_t stream);
// The same for every segment of a prefill pass (window_segments_cuda.cu):
// the `count` (<= 65535) segments' rows of qkv rotated in place, attended,
// and their last min(rows, L) keys and values kept in their slots' rings;
// max_rows >= every segment's rows.
struct WindowSegmentsArgs {
  float* qkv = nullptr;  // [pass rows, 3·H·hd] q | k | v
  int64_t qkv_stride = 0;
  int heads = 0;
  int head_dim = 0;
  int64_t window = 0;  // L, ring rows per slot
  float rotary_base = 0.0f;
  float scale = 1.0f;
  float* ring_k = nullptr;  // [slots, L, H, hd]
  float* ring_v = nullptr;  // [slots, L, H, hd]
  float* y = nullptr;       // [pass rows, H·hd]
};
cudaError_t WindowAttentionSegments(const WindowSegmentsArgs& args,
                                    const PassSegment* segments, int count,
                                    int64_t max_rows, cudaStream_t stream);
// The chunked form (ssd_chunked_cuda.cu) for shapes SsdChunkedSupported
// accepts: passes of at most `chunks_per_pass` chunks, each with
// `workspace` [chunks_per_pass, H, P, N] and `decay` [chunks_per_pass, H].
// `tensor_cores`: the states and outputs products on tensor cores (TF32
// inputs, f32 accumulation; ssd_chunked_tc.h), which also needs P and N
// multiples of 16 and a 32-byte aligned workspace (else
// cudaErrorInvalidValue); otherwise f32 on the CUDA cores.
bool SsdChunkedSupported(int head_dim, int state, int64_t chunk);
bool SsdTensorCoresSupported(int head_dim, int state);
cudaError_t SsdChunkedScan(const SsdArgs& args, int chunk,
                           int64_t chunks_per_pass, float* workspace,
                           float* decay, bool tensor_cores,
                           cudaStream_t stream);

// Causal softmax attention, bf16 in/out, head_dim 64, q/k/v/out
// [B, T, H, 64]: the flash-style baseline the benchmarks time.
cudaError_t FlashAttentionBf16(const bf16_bits* q, const bf16_bits* k,
                               const bf16_bits* v, int64_t batch,
                               int64_t tokens, int heads, float scale,
                               bf16_bits* out, cudaStream_t stream);

// ---- paged states (paged_attention_cuda.cu, rat_paged_cuda.cu) -------------
// A pass's rows over a pool of blocks: with `positions` null (prefill) row
// r is position start + r of table row 0, else position positions[r] of
// table row r (paged_rows.cuh reads them).
struct PassTableArgs {
  int64_t rows = 0;
  int64_t start = 0;
  const int64_t* positions = nullptr;  // [rows] or null
  const int32_t* table = nullptr;      // [table rows, table_width]
  int64_t table_width = 0;
  int64_t block_size = 0;
};

// ---- paged KV cache (paged_attention_cuda.cu) -------------------------------
// kernels/paged_attention.h: pools [blocks, block_size, H_kv, hd]; position
// p of table row t lives in pool row
// table[t · table_width + p / block_size] · block_size + p % block_size.
struct PagedRowsArgs : PassTableArgs {
  int heads = 0;  // H
  int kv_heads = 0;
  int head_dim = 0;
};
// k, v [rows, H_kv, hd] (row strides k_stride, v_stride) into the pools.
cudaError_t PagedKvWrite(const PagedRowsArgs& rows, const float* k,
                         int64_t k_stride, const float* v, int64_t v_stride,
                         float* k_pool, float* v_pool, cudaStream_t stream);
// out [rows, H, hd]: row r's softmax attention over positions [0, p_r] of
// its table row; q [rows, H, hd] with row stride q_stride; hd <= 128.
// splits > 1 (paged_splits.h): each (row, head)'s positions shared among
// `splits` warps through `partials` (PagedSplitFloats), except in the
// tiled prefill (8 rows or more of one sequence), which needs none. A
// prefill pass of kPagedFlashMinRows rows or more with head_dim 64 or 128
// runs PagedFlashPrefill.
cudaError_t PagedCausalAttention(const PagedRowsArgs& rows, const float* q,
                                 int64_t q_stride, const float* k_pool,
                                 const float* v_pool, float scale, float* out,
                                 int splits, float* partials,
                                 cudaStream_t stream);
// The same for a prefill pass (positions null, heads <= 65535) on the
// tensor cores: q, keys, values and softmax weights rounded to bf16, f32
// accumulation (paged_flash_prefill_cuda.cu); head_dim 64 or 128 where the
// current device gives a block the shared memory it needs
// (PagedFlashPrefillSupported), else an error.
inline constexpr int64_t kPagedFlashMinRows = 64;
bool PagedFlashPrefillSupported(int head_dim);
cudaError_t PagedFlashPrefill(const PagedRowsArgs& rows, const float* q,
                              int64_t q_stride, const float* k_pool,
                              const float* v_pool, float scale, float* out,
                              cudaStream_t stream);

// ---- RAT over paged closed chunks (rat_paged_cuda.cu) -----------------------
// kernels/rat_paged.h's rows (PassTableArgs; a prefill pass's sequence is
// in slot slots[0], a step's row r in slots[r]). Chunk c of table row t
// is closed-pool row table[t · table_width + c / block_size] · block_size
// + c % block_size; closed [blocks, block_size, 2, D] (key | value),
// open [slots, 2, D] (pre-rotation k̄ | v̄).
struct RatPagedArgs : PassTableArgs {
  int64_t chunk_size = 0;  // L
  int64_t dim = 0;         // D
  int heads = 0;           // H; hd = D / H, even
  int groups = 0;          // G
  float rope_base = 0.0f;
};
// proj [rows, 3D + 2·G·hd] (row stride proj_stride), gate_bias [D];
// q_out, k_out, v_out, z_out [rows, D].
cudaError_t RatChunkScan(const RatPagedArgs& args, const float* proj,
                         int64_t proj_stride, const float* gate_bias,
                         const int32_t* slots, float* open, float* closed,
                         float* q_out, float* k_out, float* v_out, float* z_out,
                         cudaStream_t stream);
// RatChunkScan's prefill form for each of `count` (<= 65535) segments
// (device array) of a pass in one launch: segment i's rows [first_row,
// first_row + rows) of proj and the outputs, at positions start, ..., its
// slot's open state, its closed chunks through row first_row of
// args.table (the pass's table with a row per pass row); args's rows,
// start and positions are unused. max_thread_groups >= every segment's
// max(1, chunks its rows touch - 1).
cudaError_t RatChunkScanSegments(const RatPagedArgs& args,
                                 const PassSegment* segments, int count,
                                 int64_t max_thread_groups, const float* proj,
                                 int64_t proj_stride, const float* gate_bias,
                                 float* open, float* closed, float* q_out,
                                 float* k_out, float* v_out, float* z_out,
                                 cudaStream_t stream);
// out [rows, D]: z ⊙ softmax attention over the row's closed chunks
// c' < p / L and its own key; q, own_k, own_v, z [rows, D]; hd <= 128.
cudaError_t RatPagedAttention(const RatPagedArgs& args, const float* q,
                              const float* own_k, const float* own_v,
                              const float* z, const float* closed, float scale,
                              float* out, cudaStream_t stream);

// ---- mixture-of-experts row moves (top_k_routing_cuda.cu) -------------------
// dst[i, :] = src[source_row[i], :] for i < n.
cudaError_t GatherRows(const float* src, int64_t cols,
                       const int32_t* source_row, int64_t n, float* dst,
                       cudaStream_t stream);
// x[r, :] += scale · (base[r, :] + Σ_j gate[r, j] · routed[entry[r, j], :]),
// j < k in order.
cudaError_t CombineRoutedRows(const float* base, const float* routed,
                              int64_t cols, const int32_t* entry,
                              const float* gate, int64_t rows, int k,
                              float scale, float* x, cudaStream_t stream);

// ---- mixture of experts routed per pair (routed_pairs_cuda.cu) --------------
inline constexpr int kMaxDeviceTopK = 32;
// A pair's expert when it takes none (kernels/top_k_routing.h kNoExpert).
inline constexpr float kNoExpertPair = -1.0f;
// pair_experts, pair_gates [rows·k] of logits [rows, experts]; k <=
// kMaxDeviceTopK; rows whose row_slots entry is >= first_pad_slot take no
// expert (-1, gate 0); row_slots null: none.
cudaError_t RouteTopKPairs(const float* logits, int64_t rows, int experts,
                           int k, const int32_t* row_slots,
                           int32_t first_pad_slot, float* pair_experts,
                           float* pair_gates, cudaStream_t stream);
// y[p, :] = bf16(x[p / x_group, :]) · W_e^T for pairs p < pairs, e =
// pair_experts[p], W_e = weights[e] [n_rows, cols] bf16 (zeros for e = -1);
// workspace: experts + experts · pairs int32.
cudaError_t RoutedLinear(const float* x, int64_t x_group,
                         const bf16_bits* const* weights, int experts,
                         int64_t n_rows, int64_t cols,
                         const float* pair_experts, int64_t pairs,
                         int32_t* workspace, float* y, cudaStream_t stream);
// x[r, :] += scale · (base[r, :] + Σ_j gates[r·k + j] · routed[r·k + j, :]).
cudaError_t CombineRoutedPairs(const float* base, const float* routed,
                               int64_t cols, int64_t rows, int k,
                               const float* gates, float scale, float* x,
                               cudaStream_t stream);

// ---- sampling (sampling_cuda.cu) --------------------------------------------
// kernels::SamplingRule's fields, field for field (cuda_ops.cc copies them).
struct SampleRule {
  float temperature;
  int32_t top_k;
  float top_p;
  uint64_t seed;
  uint64_t draw;
};
// out[r] = the token kernels/sampling.h picks from logits row r (row_stride
// apart, the first `vocab` values) under rules[r]; rules in device memory.
cudaError_t SampleRows(const float* logits, int64_t rows, int64_t row_stride,
                       int64_t vocab, const SampleRule* rules, int32_t* out,
                       cudaStream_t stream);

// ---- row-wise and element-wise (elementwise_cuda.cu) ------------------------
// y16 may be null; else it receives y rounded to bf16 too.
cudaError_t RmsNorm(const float* x, int64_t rows, int dim, const float* w,
                    float eps, float* y, bf16_bits* y16, cudaStream_t stream);
cudaError_t RopeRotateHalf(float* x, int64_t rows, int64_t row_stride,
                           int heads, int head_dim, int64_t start_pos,
                           float base, cudaStream_t stream);
// The same with row r at position positions[r] (device int64 [rows]).
cudaError_t RopeRotateHalfAt(float* x, int64_t rows, int64_t row_stride,
                             int heads, int head_dim, const int64_t* positions,
                             float base, cudaStream_t stream);
cudaError_t SiluMul(const float* gate, int64_t gate_stride, const float* mult,
                    int64_t mult_stride, int64_t rows, int64_t cols, float* out,
                    cudaStream_t stream);
cudaError_t ReluSquared(float* x, int64_t count, cudaStream_t stream);
// out [rows, cols] bf16 = the activation `kind` (0 SiluMul, 1 ReluSquared,
// 2 Gelu) of in (row stride in_stride; mult and its stride for kind 0).
cudaError_t ActivationToBf16(int kind, const float* in, int64_t in_stride,
                             const float* mult, int64_t mult_stride,
                             int64_t rows, int64_t cols, bf16_bits* out,
                             cudaStream_t stream);
cudaError_t Gelu(const float* x, int64_t count, float* out,
                 cudaStream_t stream);
// ssm_gating_cuda.cu
cudaError_t BiasSiluRows(float* x, int64_t rows, int64_t cols,
                         const float* bias, cudaStream_t stream);
cudaError_t SoftplusBiasRows(const float* raw, int64_t rows, int64_t stride,
                             int64_t cols, const float* bias, float* out,
                             cudaStream_t stream);
cudaError_t GatedGroupRmsNorm(const float* z, int64_t z_stride, const float* y,
                              int64_t rows, int64_t width, int64_t groups,
                              const float* w, double eps, float* out,
                              cudaStream_t stream);
cudaError_t Embedding(const int32_t* ids, int64_t rows, const bf16_bits* table,
                      int64_t dim, float scale, float* out,
                      cudaStream_t stream);
cudaError_t F32ToBf16(const float* x, int64_t count, bf16_bits* out,
                      cudaStream_t stream);
cudaError_t Bf16ToF32(const bf16_bits* x, int64_t count, float* out,
                      cudaStream_t stream);
// f16 bits -> bf16 (through f32: exact, then rounded to nearest even).
cudaError_t F16ToBf16(const uint16_t* x, int64_t count, bf16_bits* out,
                      cudaStream_t stream);
// out[r, c] = bf16(values[r, c] * scales[r, c / 64]), [rows, cols]
// row-major, scales [rows, ceil(cols / 64)] (kernels/dtype.h's kI8Block).
cudaError_t I8RowsToBf16(const int8_t* values, const float* scales,
                         int64_t rows, int64_t cols, bf16_bits* out,
                         cudaStream_t stream);
// Uniform values in [-scale, scale) from a counter-based hash of (seed, i).
cudaError_t FillUniformF32(float* x, int64_t count, uint64_t seed, float scale,
                           cudaStream_t stream);
cudaError_t FillUniformBf16(bf16_bits* x, int64_t count, uint64_t seed,
                            float scale, cudaStream_t stream);

}  // namespace twice::kernels::cuda::launch

#endif  // TWICE_KERNELS_CUDA_LAUNCH_H_
