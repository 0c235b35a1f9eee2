// CUDA implementations of the kernels/ operations, on device memory.
//
// Each function mirrors a CPU entry point of kernels/ (its CPU twin and test
// oracle) with the same equations and layouts, takes device spans (sizes are
// checked against the dimensions: INVALID_ARGUMENT on mismatch, never a
// launch), queues work on `stream` and returns without synchronising; an
// asynchronous kernel fault surfaces at the next Stream::Synchronize().
// Launch errors come back as absl::Status (kernels/cuda/cuda_status.h).
// Thread safety: distinct outputs/states may be driven from distinct
// streams concurrently.
//
// Precision: "Bf16" functions read/write bf16 and accumulate in f32; the
// others are f32 throughout (tested against the CPU twins at 1e-5 relative;
// bf16 paths at 1e-2).
#ifndef TWICE_KERNELS_CUDA_CUDA_OPS_H_
#define TWICE_KERNELS_CUDA_CUDA_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/activations.h"
#include "kernels/attention_decode.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/stream.h"
#include "kernels/linear_attention.h"
#include "kernels/paged_attention.h"
#include "kernels/pass_segments.h"
#include "kernels/rat_chunk_attention.h"
#include "kernels/rat_paged.h"
#include "kernels/sampling.h"
#include "kernels/slot_steps.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/top_k_routing.h"
#include "kernels/window_attention.h"

namespace twice::kernels::cuda {

// ---- Based / JRT-RNN -------------------------------------------------------

// Shape of the fused Based kernels: raw (pre-feature-map) q/k of width
// feature_dim F; D = 1 + F + F^2 is the state's feature width.
struct FusedLinearAttentionDims {
  int64_t batch = 0;        // B
  int64_t heads = 0;        // H
  int64_t head_dim = 0;     // hd
  int64_t feature_dim = 0;  // F
};

// Taylor feature map + chunked causal linear attention (kernels/
// linear_attention.h LinearAttentionPrefill after kernels/
// taylor_feature_map.h), batched, one fused kernel. Requires F = 16 and
// hd = 64 (the Based / JRT-RNN shapes). Layouts: q, k [B, T, H, F];
// v, y [B, T, H, hd]; kv_state [B, H, hd, D] and k_state [B, H, D] f32, read
// and updated in place.
[[nodiscard]] absl::Status LinearAttentionPrefillBf16(
    const Stream& stream, DeviceSpan<const Bf16> q, DeviceSpan<const Bf16> k,
    DeviceSpan<const Bf16> v, int64_t tokens,
    const FusedLinearAttentionDims& dims, float eps, DeviceSpan<float> kv_state,
    DeviceSpan<float> k_state, DeviceSpan<Bf16> y);

// Whether device `ordinal` gives one block the shared memory the fused
// kernel above takes (103 KiB: A100, H100 and H200 do; sm_86 and sm_89
// parts, 99 KiB, do not, and the fused calls answer UNIMPLEMENTED there).
bool FusedLinearAttentionFits(int ordinal);

// JRT-RNN prefix linear attention (kernels/prefix_linear_attention.h): the
// encoder keys/values k_enc [B, E, H, F], v_enc [B, E, H, hd] are summed
// into the state first (the encoder pass), then the causal scan starts from
// it (the merge). E = 0 equals LinearAttentionPrefillBf16.
[[nodiscard]] absl::Status PrefixLinearAttentionPrefillBf16(
    const Stream& stream, DeviceSpan<const Bf16> q, DeviceSpan<const Bf16> k,
    DeviceSpan<const Bf16> v, int64_t tokens, DeviceSpan<const Bf16> k_enc,
    DeviceSpan<const Bf16> v_enc, int64_t encoder_tokens,
    const FusedLinearAttentionDims& dims, float eps, DeviceSpan<float> kv_state,
    DeviceSpan<float> k_state, DeviceSpan<Bf16> y);

// Recurrent decode step for one token of each of B sequences, f32, feature
// map fused (any F): q, k [B, H, F]; v, y [B, H, hd]; states as above.
[[nodiscard]] absl::Status LinearAttentionStep(
    const Stream& stream, DeviceSpan<const float> q, DeviceSpan<const float> k,
    DeviceSpan<const float> v, const FusedLinearAttentionDims& dims, float eps,
    DeviceSpan<float> kv_state, DeviceSpan<float> k_state, DeviceSpan<float> y);

// kernels/prefix_linear_attention.h PrefixLinearAttentionPrefill on
// featurized inputs, f32, any head_dim and D = feature_size <= 2048 (E = 0
// is kernels/linear_attention.h's Prefill, T = 1 its Step): phi_q, phi_k
// [T, H, D]; v, y [T, H, hd]; phi_k_enc [E, H, D]; v_enc [E, H, hd];
// kv_state [H, hd, D], k_state [H, D] in place. The recurrent form: the
// engine's layers call it when their feature map ran as its own op.
[[nodiscard]] absl::Status FeaturizedLinearAttention(
    const Stream& stream, DeviceSpan<const float> phi_q,
    DeviceSpan<const float> phi_k, DeviceSpan<const float> v, int64_t tokens,
    DeviceSpan<const float> phi_k_enc, DeviceSpan<const float> v_enc,
    int64_t encoder_tokens, const LinearAttentionDims& dims, float eps,
    DeviceSpan<float> kv_state, DeviceSpan<float> k_state, DeviceSpan<float> y);

// kernels/taylor_feature_map.h: x [rows, F] -> out [rows, D], f32.
[[nodiscard]] absl::Status TaylorFeatureMap(const Stream& stream,
                                            DeviceSpan<const float> x,
                                            int64_t rows, int64_t feature_dim,
                                            DeviceSpan<float> out);

// ---- sequence mixers (f32)
// ---------------------------------------------------

// kernels/causal_conv1d.h.
[[nodiscard]] absl::Status CausalConv1d(
    const Stream& stream, DeviceSpan<const float> x, int64_t tokens,
    int64_t channels, int64_t x_stride, DeviceSpan<const float> weight,
    int64_t kernel_size, DeviceSpan<float> tail, DeviceSpan<float> out);

// Whether the softmax attention kernels below (window, causal GQA, RAT
// chunk) take this head_dim: one warp per row, lane l holding dimensions
// l, l + 32, ... below head_dim in registers sized for four, so any
// head_dim in [1, 128].
bool AttentionHeadDimSupported(int64_t head_dim);

// kernels/window_attention.h (head_dim <= 128).
[[nodiscard]] absl::Status WindowAttention(
    const Stream& stream, DeviceSpan<const float> q, int64_t q_stride,
    DeviceSpan<const float> k, DeviceSpan<const float> v,
    const WindowAttentionDims& dims, float scale, DeviceSpan<float> out);

// kernels/attention_decode.h (head_dim <= 128).
[[nodiscard]] absl::Status CausalGqaAttention(
    const Stream& stream, DeviceSpan<const float> q, int64_t q_stride,
    DeviceSpan<const float> k, DeviceSpan<const float> v,
    const CausalAttentionDims& dims, float scale, DeviceSpan<float> out);

struct DeviceRows {
  DeviceSpan<const float> data;
  int64_t stride = 0;  // elements between rows, >= H·hd
};

// kernels/rat_chunk_attention.h. `visible` stays on the host: it is checked
// (0 <= visible[t] <= chunks) and uploaded through `allocator`.
[[nodiscard]] absl::Status RatChunkAttention(
    const Stream& stream, DeviceAllocator& allocator, DeviceRows q,
    DeviceRows own_k, DeviceRows own_v, DeviceRows chunk_k, DeviceRows chunk_v,
    absl::Span<const int64_t> visible, const RatAttentionDims& dims,
    float scale, DeviceSpan<float> out);

// kernels/ssd_chunk_scan.h SsdChunkScan with the same arguments (P <= 1024,
// N <= 128). From kSsdChunkedMinTokens tokens on, with P <= 128 and chunk
// <= 256, the chunked form runs (every chunk's tokens at once, a workspace
// of at most kSsdWorkspaceBytes from `allocator`); shorter reads (decode
// steps) and other shapes run the recurrent form with the state in
// registers. Both are the same function up to float summation order.
// The chunked form multiplies on the tensor cores (TF32 inputs, f32
// accumulation: about 1e-3 relative) where P and N are multiples of 16,
// unless `math` asks for kF32 (the CUDA cores, the CPU twin's precision).
inline constexpr int64_t kSsdChunkedMinTokens = 64;
inline constexpr int64_t kSsdWorkspaceBytes = int64_t{256} << 20;
enum class SsdMath { kTensorCores, kF32 };
[[nodiscard]] absl::Status SsdChunkScan(
    const Stream& stream, DeviceAllocator& allocator, const SsdShape& shape,
    int64_t tokens, int64_t chunk, DeviceSpan<const float> x, int64_t x_stride,
    DeviceSpan<const float> b, DeviceSpan<const float> c, int64_t bc_stride,
    DeviceSpan<const float> dt, DeviceSpan<const float> a,
    DeviceSpan<const float> d, DeviceSpan<float> state, DeviceSpan<float> y,
    SsdMath math = SsdMath::kTensorCores);

// A prefill pass's segments (kernels/pass_segments.h): the host copy is
// what the checks read, `device` the same segments on the device as four
// int64 each (first_row, rows, slot, start; uploaded once per pass by the
// caller).
struct DevicePassSegments {
  absl::Span<const PassSegment> host;
  DeviceSpan<const int64_t> device;
};

// CausalConv1d of each segment's rows of the pass's `rows` rows of x into
// out, with its slot's tail of `tails` [slots, (K - 1)·channels], K >= 2;
// two launches (the outputs, then the tails) for every segment (at most
// 65535).
[[nodiscard]] absl::Status CausalConv1dSegments(
    const Stream& stream, DeviceSpan<const float> x, int64_t rows,
    int64_t channels, int64_t x_stride, DeviceSpan<const float> weight,
    int64_t kernel_size, DeviceSpan<float> tails,
    const DevicePassSegments& segments, DeviceSpan<float> out);
// The recurrent SSD scan (SsdChunkScan's short form) of each segment's
// rows with its slot's state of `states` [slots, H·P·N], one launch for
// every segment (at most 65535; N <= 128). For passes of short sequences:
// a long one is faster in SsdChunkScan's chunked form.
[[nodiscard]] absl::Status SsdScanSegments(
    const Stream& stream, const SsdShape& shape, int64_t rows,
    DeviceSpan<const float> x, int64_t x_stride, DeviceSpan<const float> b,
    DeviceSpan<const float> c, int64_t bc_stride, DeviceSpan<const float> dt,
    DeviceSpan<const float> a, DeviceSpan<const float> d,
    DeviceSpan<float> states, const DevicePassSegments& segments,
    DeviceSpan<float> y);

// FeaturizedLinearAttention (no encoder) of each segment's rows of the
// pass's `rows` rows (phi_q, phi_k [rows, H, D]; v, y [rows, H, hd]) with
// its slot's state of kv_states [slots, H, hd, D] and k_states [slots, H,
// D], one launch for every segment (at most 65535; hd and D as
// LinearAttentionSegmentsFit). For passes of short reads: from
// kLinearAttentionSegmentMaxRows rows on, a read is faster in the chunked
// kernel.
inline constexpr int64_t kLinearAttentionSegmentMaxRows = 64;
bool LinearAttentionSegmentsFit(int64_t head_dim, int64_t feature_size);
[[nodiscard]] absl::Status LinearAttentionSegments(
    const Stream& stream, DeviceSpan<const float> phi_q,
    DeviceSpan<const float> phi_k, DeviceSpan<const float> v, int64_t rows,
    const LinearAttentionDims& dims, float eps, DeviceSpan<float> kv_states,
    DeviceSpan<float> k_states, const DevicePassSegments& segments,
    DeviceSpan<float> y);

// Sliding-window attention of each segment's rows (q | k | v at columns
// 0, H·hd, 2·H·hd of qkv's `rows` rows, `qkv_stride` apart; q and k are
// rotated in place at the segment's positions) after the keys of its
// slot's ring_k, ring_v [slots, L, H·hd], into y [rows, H·hd]; then each
// ring ends with its segment's last keys and values (three launches for
// every segment, at most 65535; head_dim even and <= 128). A warp per
// query and head: for passes of reads under kWindowSegmentMaxRows rows
// (a longer one is faster with its keys staged in tiles).
inline constexpr int64_t kWindowSegmentMaxRows = 64;
[[nodiscard]] absl::Status WindowAttentionSegments(
    const Stream& stream, DeviceSpan<float> qkv, int64_t rows,
    int64_t qkv_stride, const WindowStepDims& dims, float rotary_base,
    float scale, DeviceSpan<float> ring_k, DeviceSpan<float> ring_v,
    const DevicePassSegments& segments, DeviceSpan<float> y);

// A batch's row -> slot map (kernels/slot_steps.h): the host copy is what
// the checks read, `device` the same int32 values on the device (uploaded
// once per step by the caller).
struct DeviceSlotRows {
  absl::Span<const int32_t> host;
  DeviceSpan<const int32_t> device;
};

// kernels/slot_steps.h, one launch for all rows (rows <= 65535; SSD:
// N <= 128; linear attention: any head_dim, D = 1 + F + F^2 <= 2048;
// window: head_dim <= 128). The window step's positions come as the host
// copy the checks read and the same int64 values on the device.
[[nodiscard]] absl::Status CausalConv1dStepSlots(
    const Stream& stream, DeviceSpan<const float> x, int64_t channels,
    int64_t x_stride, DeviceSpan<const float> weight, int64_t kernel_size,
    DeviceSpan<float> tails, const DeviceSlotRows& slots,
    DeviceSpan<float> out);
[[nodiscard]] absl::Status SsdStepSlots(
    const Stream& stream, const SsdShape& shape, DeviceSpan<const float> x,
    int64_t x_stride, DeviceSpan<const float> b, DeviceSpan<const float> c,
    int64_t bc_stride, DeviceSpan<const float> dt, DeviceSpan<const float> a,
    DeviceSpan<const float> d, DeviceSpan<float> states,
    const DeviceSlotRows& slots, DeviceSpan<float> y);
[[nodiscard]] absl::Status LinearAttentionStepSlots(
    const Stream& stream, DeviceSpan<const float> q, DeviceSpan<const float> k,
    DeviceSpan<const float> v, const LinearAttentionStepDims& dims, float eps,
    DeviceSpan<float> kv_states, DeviceSpan<float> k_states,
    const DeviceSlotRows& slots, DeviceSpan<float> y);
[[nodiscard]] absl::Status WindowAttentionStepSlots(
    const Stream& stream, DeviceSpan<const float> qkv, int64_t qkv_stride,
    const WindowStepDims& dims, float rotary_base, float scale,
    DeviceSpan<const int64_t> positions_device,
    absl::Span<const int64_t> positions_host, DeviceSpan<float> ring_k,
    DeviceSpan<float> ring_v, const DeviceSlotRows& slots, DeviceSpan<float> y);

// Causal softmax attention, bf16, head_dim 64, q/k/v/out [B, T, H, 64]: the
// flash-style baseline of the benchmarks (CPU twin: CausalGqaAttention with
// H_kv = H and no past).
[[nodiscard]] absl::Status FlashAttentionBf16(
    const Stream& stream, DeviceSpan<const Bf16> q, DeviceSpan<const Bf16> k,
    DeviceSpan<const Bf16> v, int64_t batch, int64_t tokens, int64_t heads,
    int64_t head_dim, float scale, DeviceSpan<Bf16> out);

// ---- paged KV cache (f32) ---------------------------------------------------

// A pass's rows (kernels/paged_attention.h PagedRows): positions empty for
// a prefill pass, else one per row, the host copy the checks read and the
// same values on the device.
struct DevicePagedRows {
  int64_t rows = 0;
  int64_t start = 0;
  absl::Span<const int64_t> positions_host;
  DeviceSpan<const int64_t> positions_device;
};

// A block table [table rows, width]: host copy for the checks, device copy
// for the kernels.
struct DeviceBlockTableView {
  absl::Span<const int32_t> host;
  DeviceSpan<const int32_t> device;
};

// kernels/paged_attention.h on device pools [blocks, block_size, H_kv, hd]:
// the CPU twins' checks (CheckPagedRows and the span sizes) run on the host
// copies before any launch, and the device copies must match them in size.
// PagedCausalAttention needs head_dim <= 128 (AttentionHeadDimSupported);
// both need H and head_dim <= 65535. A prefill pass of 64 rows or more at
// head_dim 64 or 128 runs on the tensor cores (bf16 inputs and weights, f32
// accumulation: about 1e-3 relative); other passes are f32.
[[nodiscard]] absl::Status PagedKvWrite(
    const Stream& stream, DeviceSpan<const float> k, int64_t k_stride,
    DeviceSpan<const float> v, int64_t v_stride, const DevicePagedRows& rows,
    const PagedKvDims& dims, const DeviceBlockTableView& table,
    DeviceSpan<float> k_pool, DeviceSpan<float> v_pool);
// A split pass (paged_splits.h): `splits` warps per (row, head) sharing
// its positions, their partial sums in `partials` (at least
// PagedSplitFloats floats; unused with splits = 1).
struct PagedSplit {
  int64_t splits = 1;
  DeviceSpan<float> partials;
};
[[nodiscard]] absl::Status PagedCausalAttention(
    const Stream& stream, DeviceSpan<const float> q, int64_t q_stride,
    const DevicePagedRows& rows, const PagedKvDims& dims,
    const DeviceBlockTableView& table, DeviceSpan<const float> k_pool,
    DeviceSpan<const float> v_pool, float scale, DeviceSpan<float> out,
    const PagedSplit& split = {});

// ---- RAT over paged closed chunks (f32) -------------------------------------

// kernels/rat_paged.h; slots: host copy for the checks, device copy for the
// kernel. Open state [slots, 2, D], closed pool [blocks, block_size, 2, D].
// The CPU twins' checks (CheckRatPagedRows, the span sizes, the slots) run
// on the host copies before any launch, and the device copies of
// positions, slots and table must match them in size. RatPagedAttention
// needs head_dim <= 128 (AttentionHeadDimSupported); both need
// H <= 65535.
[[nodiscard]] absl::Status RatChunkScan(
    const Stream& stream, DeviceSpan<const float> proj, int64_t proj_stride,
    DeviceSpan<const float> gate_bias, const DevicePagedRows& rows,
    const DeviceSlotRows& slots, const RatPagedDims& dims,
    const DeviceBlockTableView& table, DeviceSpan<float> open,
    DeviceSpan<float> closed, DeviceSpan<float> q_out, DeviceSpan<float> k_out,
    DeviceSpan<float> v_out, DeviceSpan<float> z_out);
// RatChunkScan's prefill form for every segment of a pass of `rows` rows
// in one launch (at most 65535 segments): segment i's rows of proj and
// the outputs, its slot's [2, D] of open [slots, 2, D], its closed chunks
// through row first_row of `row_table` [rows, dims.table_width] (a row
// per pass row); each segment gets RatChunkScan's checks.
[[nodiscard]] absl::Status RatChunkScanSegments(
    const Stream& stream, DeviceSpan<const float> proj, int64_t proj_stride,
    DeviceSpan<const float> gate_bias, int64_t rows,
    const DevicePassSegments& segments, const RatPagedDims& dims,
    const DeviceBlockTableView& row_table, DeviceSpan<float> open,
    DeviceSpan<float> closed, DeviceSpan<float> q_out, DeviceSpan<float> k_out,
    DeviceSpan<float> v_out, DeviceSpan<float> z_out);
[[nodiscard]] absl::Status RatPagedAttention(
    const Stream& stream, DeviceSpan<const float> q,
    DeviceSpan<const float> own_k, DeviceSpan<const float> own_v,
    DeviceSpan<const float> z, const DevicePagedRows& rows,
    const RatPagedDims& dims, const DeviceBlockTableView& table,
    DeviceSpan<const float> closed, float scale, DeviceSpan<float> out);

// ---- mixture-of-experts row moves (f32) -------------------------------------

// A route table (kernels/top_k_routing.h): the host copy the checks read,
// and its source_row, entry and gate arrays on the device.
struct DeviceRoutesView {
  const TopKRoutes* host = nullptr;
  DeviceSpan<const int32_t> source_row;
  DeviceSpan<const int32_t> entry;
  DeviceSpan<const float> gate;
};

// kernels/top_k_routing.h's GatherRows and CombineRoutedRows (accumulating
// into x), with the CPU twins' checks on the host copy; the device copies
// must match it in size.
[[nodiscard]] absl::Status GatherRows(const Stream& stream,
                                      DeviceSpan<const float> src, int64_t cols,
                                      const DeviceRoutesView& routes,
                                      DeviceSpan<float> dst);
[[nodiscard]] absl::Status CombineRoutedRows(const Stream& stream,
                                             DeviceSpan<const float> base,
                                             DeviceSpan<const float> routed,
                                             int64_t cols,
                                             const DeviceRoutesView& routes,
                                             float scale, DeviceSpan<float> x);

// ---- mixture of experts routed per pair (f32 rows, bf16 weights) ------------

// kernels/top_k_routing.h PaddingRows with the rows' slots on the device
// (a step's slot map): rows whose slot is >= first_slot take no expert.
struct DevicePaddingRows {
  DeviceSpan<const int32_t> row_slots;  // [rows] or empty: no padding
  int32_t first_slot = 0;
};

// kernels/top_k_routing.h RouteTopKPairs on the device: logits [rows, E]
// into pair_experts and pair_gates [rows·k]; k <= 32, E < 2^24.
[[nodiscard]] absl::Status RouteTopKPairs(
    const Stream& stream, DeviceSpan<const float> logits, int64_t rows,
    int64_t experts, int64_t top_k, const DevicePaddingRows& padding,
    DeviceSpan<float> pair_experts, DeviceSpan<float> pair_gates);

// The experts' matrices of one routed product: `experts` bf16 matrices
// [rows, cols], row-major, at the device pointers `matrices`.
struct RoutedWeights {
  DeviceSpan<const Bf16* const> matrices;
  int64_t experts = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};
// int32 workspace RoutedLinear needs for `pairs` pairs.
inline int64_t RoutedLinearWorkspace(int64_t experts, int64_t pairs) {
  return experts * (1 + pairs);
}
// y [pairs, W rows] = x[p / x_group, :] · W_{e_p}^T, e_p = pair_experts[p]
// (RouteTopKPairs's floats; a kNoExpert pair's row is zeros, a pair whose
// expert is otherwise out of range is left unwritten), x [pairs / x_group,
// W cols] rounded to bf16 as a GEMM's input, f32 sums; each used expert's
// weights read once per call.
[[nodiscard]] absl::Status RoutedLinear(
    const Stream& stream, DeviceSpan<const float> x, int64_t x_group,
    const RoutedWeights& weights, DeviceSpan<const float> pair_experts,
    int64_t pairs, DeviceSpan<int32_t> workspace, DeviceSpan<float> y);
// kernels/top_k_routing.h CombineRoutedPairs (accumulating into x).
[[nodiscard]] absl::Status CombineRoutedPairs(
    const Stream& stream, DeviceSpan<const float> base,
    DeviceSpan<const float> routed, int64_t cols, int64_t rows, int64_t top_k,
    DeviceSpan<const float> gates, float scale, DeviceSpan<float> x);

// ---- row-wise and element-wise ----------------------------------------------

// kernels/rms_norm.h; the second overload also writes y rounded to bf16
// into y16 in the same pass, a GEMM's input (bit for bit what
// ConvertToBf16 of y gives).
[[nodiscard]] absl::Status RmsNorm(const Stream& stream,
                                   DeviceSpan<const float> x, int64_t rows,
                                   int64_t dim, DeviceSpan<const float> weight,
                                   float eps, DeviceSpan<float> y);
[[nodiscard]] absl::Status RmsNorm(const Stream& stream,
                                   DeviceSpan<const float> x, int64_t rows,
                                   int64_t dim, DeviceSpan<const float> weight,
                                   float eps, DeviceSpan<float> y,
                                   DeviceSpan<Bf16> y16);

// kernels/rope.h (in place).
[[nodiscard]] absl::Status RopeRotateHalf(const Stream& stream,
                                          DeviceSpan<float> x, int64_t rows,
                                          int64_t row_stride, int64_t heads,
                                          int64_t head_dim, int64_t start_pos,
                                          float base);
// kernels/rope.h RopeRotateHalfAt: row r at position positions[r], the
// host copy the checks read and the same values on the device
// (paged_attention_ops.cc).
[[nodiscard]] absl::Status RopeRotateHalfAt(
    const Stream& stream, DeviceSpan<float> x, int64_t rows, int64_t row_stride,
    int64_t heads, int64_t head_dim, absl::Span<const int64_t> positions_host,
    DeviceSpan<const int64_t> positions_device, float base);

// kernels/activations.h.
[[nodiscard]] absl::Status SiluMul(const Stream& stream,
                                   DeviceSpan<const float> gate,
                                   int64_t gate_stride,
                                   DeviceSpan<const float> mult,
                                   int64_t mult_stride, int64_t rows,
                                   int64_t cols, DeviceSpan<float> out);
[[nodiscard]] absl::Status SwiGlu(const Stream& stream,
                                  DeviceSpan<const float> u, int64_t rows,
                                  int64_t hidden, DeviceSpan<float> out);
// kernels/activations.h ReluSquared (in place).
[[nodiscard]] absl::Status ReluSquared(const Stream& stream,
                                       DeviceSpan<float> x);
// Exact GELU, u/2 (1 + erf(u / sqrt 2)) (engine/layers/gelu_mlp.h).
[[nodiscard]] absl::Status Gelu(const Stream& stream, DeviceSpan<const float> x,
                                DeviceSpan<float> out);
// One of the three activations above of rows [rows, cols] of `in` (row
// stride in_stride; mult and its stride for kSiluMul), written only as
// bf16 into out [rows, cols]: a GEMM's input, bit for bit what
// ConvertToBf16 of the f32 activation gives.
[[nodiscard]] absl::Status ActivationToBf16(
    const Stream& stream, MlpActivationKind kind, DeviceSpan<const float> in,
    int64_t in_stride, DeviceSpan<const float> mult, int64_t mult_stride,
    int64_t rows, int64_t cols, DeviceSpan<Bf16> out);

// kernels/ssm_gating.h (the Mamba-2 steps around the SSD scan).
[[nodiscard]] absl::Status BiasSiluRows(const Stream& stream,
                                        DeviceSpan<float> x, int64_t rows,
                                        DeviceSpan<const float> bias);
[[nodiscard]] absl::Status SoftplusBiasRows(const Stream& stream,
                                            DeviceSpan<const float> raw,
                                            int64_t rows, int64_t stride,
                                            DeviceSpan<const float> bias,
                                            DeviceSpan<float> out);
[[nodiscard]] absl::Status GatedGroupRmsNorm(
    const Stream& stream, DeviceSpan<const float> z, int64_t z_stride,
    DeviceSpan<const float> y, int64_t rows, int64_t width, int64_t groups,
    DeviceSpan<const float> weight, double eps, DeviceSpan<float> out);

// out[i, :] = scale · f32(table[ids[i], :]); ids on the host, checked
// against `vocab` and uploaded through `allocator`. table [vocab, dim] bf16.
[[nodiscard]] absl::Status Embedding(const Stream& stream,
                                     DeviceAllocator& allocator,
                                     absl::Span<const int32_t> ids,
                                     DeviceSpan<const Bf16> table,
                                     int64_t vocab, int64_t dim, float scale,
                                     DeviceSpan<float> out);

// kernels/sampling.h on the device: out[r] = the token rules[r] picks from
// logits row r (rows `row_stride` apart, the first `vocab` values). Rules
// on the host, validated and uploaded through `allocator`.
[[nodiscard]] absl::Status SampleRows(const Stream& stream,
                                      DeviceAllocator& allocator,
                                      DeviceSpan<const float> logits,
                                      int64_t rows, int64_t row_stride,
                                      int64_t vocab,
                                      absl::Span<const SamplingRule> rules,
                                      DeviceSpan<int32_t> out);

// The two above with their inputs already on the device (a recorded decode
// step's buffers): token ids the caller checked against `vocab`, and
// rules in their device form (PackSamplingRules of validated rules).
// Nothing is allocated or copied from the host, so a stream capture can
// record them.
[[nodiscard]] absl::Status EmbeddingOfDeviceIds(const Stream& stream,
                                                DeviceSpan<const int32_t> ids,
                                                DeviceSpan<const Bf16> table,
                                                int64_t vocab, int64_t dim,
                                                float scale,
                                                DeviceSpan<float> out);
// Bytes of one rule's device form.
int64_t DeviceSamplingRuleBytes();
// `rules` (validated) in their device form, DeviceSamplingRuleBytes each,
// into `out` (at least that many bytes per rule).
void PackSamplingRules(absl::Span<const SamplingRule> rules, void* out);
[[nodiscard]] absl::Status SampleRowsOfDeviceRules(
    const Stream& stream, DeviceSpan<const float> logits, int64_t rows,
    int64_t row_stride, int64_t vocab, const void* device_rules,
    DeviceSpan<int32_t> out);

[[nodiscard]] absl::Status ConvertToBf16(const Stream& stream,
                                         DeviceSpan<const float> x,
                                         DeviceSpan<Bf16> out);
[[nodiscard]] absl::Status ConvertToF32(const Stream& stream,
                                        DeviceSpan<const Bf16> x,
                                        DeviceSpan<float> out);
// A weight stored in f16 (bits) or int8 with one f32 scale per block of
// kI8Block elements of a row (kernels/dtype.h), as the bf16 the GEMMs
// read: out [rows, cols].
[[nodiscard]] absl::Status ConvertF16ToBf16(const Stream& stream,
                                            DeviceSpan<const uint16_t> x,
                                            DeviceSpan<Bf16> out);
[[nodiscard]] absl::Status DequantizeRowsToBf16(const Stream& stream,
                                                DeviceSpan<const int8_t> values,
                                                DeviceSpan<const float> scales,
                                                int64_t rows, int64_t cols,
                                                DeviceSpan<Bf16> out);

// Fills x with uniform values in [-scale, scale) from a counter-based hash
// of (seed, index): reproducible device-side inputs for benchmarks.
[[nodiscard]] absl::Status FillUniform(const Stream& stream,
                                       DeviceSpan<float> x, uint64_t seed,
                                       float scale);
[[nodiscard]] absl::Status FillUniform(const Stream& stream, DeviceSpan<Bf16> x,
                                       uint64_t seed, float scale);

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_CUDA_OPS_H_
