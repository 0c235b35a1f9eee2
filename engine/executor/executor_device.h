// ExecutorDevice: the memory and the operations a resident model executor
// runs on one device. The executor (resident_executor.h) keeps its weights,
// its activation workspace and its sequences' states in the device's memory
// and drives a whole forward pass through these calls; the only data that
// crosses to the host is what the caller asks for (token ids, a state the
// store saves, logits in tests).
//
// Two implementations: CpuExecutorDevice (host memory, kernels/ on the CPU:
// what CI runs, and the reference for the other) and CudaExecutorDevice
// (device memory, kernels/cuda/cuda_ops.h on one stream, copies to the
// host on a second; decode steps recorded as graphs). The executor's
// logic (slots, batching, checks, save/load, step buffers) is the same
// code on both; only the CUDA device records graphs.
//
// Operations mirror kernels/ entry points with the same equations and
// layouts (see each one's header); sizes are checked there. On an
// asynchronous device a call queues work and returns; errors of queued work
// surface at the next Synchronize or copy to the host.
// Not thread-safe: one executor drives its device from one thread at a time.
#ifndef TWICE_ENGINE_EXECUTOR_EXECUTOR_DEVICE_H_
#define TWICE_ENGINE_EXECUTOR_EXECUTOR_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/executor/device_pass_segments.h"
#include "engine/executor/device_step.h"
#include "kernels/activations.h"
#include "kernels/paged_attention.h"
#include "kernels/rat_paged.h"
#include "kernels/sampling.h"
#include "kernels/slot_steps.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/taylor_linear_attention.h"
#include "kernels/tensor.h"
#include "kernels/top_k_routing.h"
#include "kernels/window_attention.h"

namespace twice::engine {

// floats in one device's memory; does not own.
struct DeviceFloats {
  float* data = nullptr;
  int64_t size = 0;

  DeviceFloats sub(int64_t offset, int64_t count) const {
    return {data + offset, count};
  }
};

// An owned block of floats in a device's memory, zero-filled at creation.
class DeviceArray {
 public:
  virtual ~DeviceArray() = default;
  virtual DeviceFloats floats() const = 0;
};

// A weight matrix [rows, cols] kept on the device in the form its Linear
// reads (the checkpoint's dtype on the CPU; bf16 on CUDA).
class DeviceMatrix {
 public:
  virtual ~DeviceMatrix() = default;
  virtual int64_t rows() const = 0;
  virtual int64_t cols() const = 0;
  virtual int64_t bytes() const = 0;
};

// The matrices of a mixture's experts for one routed product (all of one
// shape), indexed by expert on the device (RoutedLinear). Does not own
// them: they stay the layer's.
class DeviceMatrixTable {
 public:
  virtual ~DeviceMatrixTable() = default;
  virtual int64_t experts() const = 0;
  virtual int64_t rows() const = 0;
  virtual int64_t cols() const = 0;
};

// The block tables [rows, width] of a step's sequences, or of one
// prefill sequence, over a paged KV cache (kernels/paged_attention.h),
// resident on the device for the paged operations (a step's kept per batch
// size and refilled; a prefill sequence's uploaded once per call; shared
// by every layer).
class DeviceBlockTable {
 public:
  virtual ~DeviceBlockTable() = default;
  virtual absl::Span<const int32_t> blocks() const = 0;  // host copy
  virtual int64_t width() const = 0;
};

// One prefill pass's mixture-of-experts routes (kernels/top_k_routing.h)
// on the device for its row moves (uploaded once per layer and pass: the
// routing itself runs on the host over router logits brought back; a
// decode step routes on the device, RouteTopKPairs).
class DeviceRoutes {
 public:
  virtual ~DeviceRoutes() = default;
  virtual const kernels::TopKRoutes& routes() const = 0;  // host copy
};

// The rows of one pass as the paged operations see them: `rows`
// consecutive tokens of one sequence from position `start` (a prefill
// segment, block table row 0), or one token per row of a step at the map's
// positions (table row r).
struct DevicePassRows {
  int64_t rows = 0;
  int64_t start = 0;
  const DeviceSlotMap* step = nullptr;
};

// The rows a decode step adds to fill its batch-size bucket: the rows of
// `step` whose slot is at or past `first_slot` (the executor's pad slots).
// Read from the step's slot map on the device, so a recorded step knows
// them at every replay. No step: no padding.
struct StepPadRows {
  const DeviceSlotMap* step = nullptr;
  int32_t first_slot = 0;
};

// What a Linear does besides the product: a bias per output column, a
// scale, and accumulation into y (a residual add fused into the GEMM's
// epilogue): y (+)= scale · (x · W^T + bias). Granite-4.0-H scales its
// residual adds and logits; a device may refuse a scale with a bias
// (UNIMPLEMENTED).
struct LinearEpilogue {
  DeviceFloats bias;        // [W.rows], or empty: no bias
  bool accumulate = false;  // y += ... instead of y =
  float scale = 1.0f;
};

// The element-wise step between an MLP's two products over `rows` rows of
// `cols` of `in` (row stride in_stride): silu(in) · mult (mult with its
// stride), relu(in)² or exact GELU (kernels/activations.h).
struct MlpActivation {
  kernels::MlpActivationKind kind = kernels::MlpActivationKind::kSiluMul;
  DeviceFloats in;
  int64_t in_stride = 0;
  DeviceFloats mult;  // kSiluMul only
  int64_t mult_stride = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

// One product of Linears: y (+)= x · W^T by `epilogue`.
struct LinearOutput {
  const DeviceMatrix* weight = nullptr;
  DeviceFloats y;
  LinearEpilogue epilogue;
};

// One copy of a device view into host memory of the same size.
struct HostCopy {
  DeviceFloats from;
  absl::Span<float> to;
};

// Bytes the device moved to and from the host since it was created, and
// how long the host waited for it.
struct DeviceTraffic {
  int64_t bytes_to_device = 0;  // inputs and states uploaded
  int64_t bytes_to_host = 0;    // ids, states and logits downloaded
  int64_t weight_bytes = 0;     // weights uploaded (once, at executor load)
  // Host time blocked in copies to the host (an asynchronous device; 0 on
  // the CPU). A decode step that waits little of its time was bound by
  // the host queueing its kernels, not by the device running them: what a
  // CUDA graph of the step would remove.
  int64_t host_wait_ns = 0;
  int64_t graph_launches = 0;  // recorded steps replayed (Launch)
};

class ExecutorDevice {
 public:
  virtual ~ExecutorDevice() = default;

  // "cpu", "cuda:0 (<GPU>)".
  virtual std::string name() const = 0;
  // Makes this device the calling thread's current one (CUDA:
  // cudaSetDevice; the CPU has nothing to do). The executor calls it at
  // the start of each call that runs work, since the thread that drives it
  // may change between calls (the decode loop's thread, a request's).
  [[nodiscard]] virtual absl::Status MakeCurrent() { return absl::OkStatus(); }
  virtual DeviceTraffic traffic() const = 0;

  // ---- memory
  // RESOURCE_EXHAUSTED when the device has no room.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceArray>> Allocate(
      int64_t floats) = 0;
  [[nodiscard]] virtual absl::Status Zero(DeviceFloats x) = 0;
  // Queues the copy; `host` may be reused when this returns (CUDA: staged
  // in page-locked memory, so the stream's queued work is not drained).
  [[nodiscard]] virtual absl::Status CopyToDevice(absl::Span<const float> host,
                                                  DeviceFloats device) = 0;
  // Waits for the queued work that writes the copies' sources and copies
  // each into its host memory: a saved state's arrays cross together, with
  // one wait (CUDA: on a copy stream, through page-locked memory).
  // INVALID_ARGUMENT, before anything is copied, when a copy's sizes differ.
  [[nodiscard]] virtual absl::Status CopyAllToHost(
      absl::Span<const HostCopy> copies) = 0;
  [[nodiscard]] absl::Status CopyToHost(DeviceFloats device,
                                        absl::Span<float> host) {
    const HostCopy one[] = {{device, host}};
    return CopyAllToHost(one);
  }
  // `slots` (distinct slot indices, one per row) and `positions` (one per
  // row, >= 0) on the device.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceSlotMap>>
  UploadSlotMap(absl::Span<const int32_t> slots,
                absl::Span<const int64_t> positions) = 0;
  // Copies `rows` rows of `cols` floats between two strided views (row
  // strides >= cols) on the device: the gathers and scatters of a ring.
  [[nodiscard]] virtual absl::Status CopyRows(DeviceFloats src,
                                              int64_t src_stride,
                                              DeviceFloats dst,
                                              int64_t dst_stride, int64_t rows,
                                              int64_t cols) = 0;
  // A block table [table.size() / width, width] of block indices (-1:
  // none) on the device.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceBlockTable>>
  UploadBlockTable(absl::Span<const int32_t> table, int64_t width) = 0;
  // Refills `table` (made by UploadBlockTable) in place with `rows`
  // [table's rows, width], width <= table.width(), each row padded with -1
  // to the table's width: a decode step's tables stay where a recorded
  // step reads them (queued like CopyToDevice; INVALID_ARGUMENT, with the
  // table unchanged, for another row count or a wider table).
  [[nodiscard]] virtual absl::Status FillBlockTable(
      DeviceBlockTable& table, absl::Span<const int32_t> rows,
      int64_t width) = 0;
  // `routes` (checked: kernels::CheckRoutes) on the device.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceRoutes>>
  UploadRoutes(kernels::TopKRoutes routes) = 0;
  // A matrix [rows, cols] (rank 2, or rank 3 flattened to rows x rest) of
  // any weight dtype. UNIMPLEMENTED for a dtype the device does not read.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceMatrix>>
  UploadMatrix(const kernels::Tensor& weight) = 0;
  // Waits for all queued work; reports any asynchronous fault.
  [[nodiscard]] virtual absl::Status Synchronize() = 0;

  // ---- decode steps
  // A step of `rows` >= 1 sequences (DeviceStep), empty until FillStep.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceStep>> NewStep(
      int64_t rows) = 0;
  // One step's inputs into `step`, one of each per row (checked as
  // UploadSlotMap's, rules by kernels::ValidateSamplingRule); queued, the
  // host spans may be reused when it returns. Token ids are the caller's
  // to check against the vocabulary (EmbedStep reads them on the device).
  [[nodiscard]] virtual absl::Status FillStep(
      DeviceStep& step, absl::Span<const int32_t> ids,
      absl::Span<const int32_t> slots, absl::Span<const int64_t> positions,
      absl::Span<const kernels::SamplingRule> rules) = 0;
  // Embedding of the step's token ids (on the device) into out.
  [[nodiscard]] virtual absl::Status EmbedStep(const DeviceStep& step,
                                               const DeviceMatrix& table,
                                               float scale,
                                               DeviceFloats out) = 0;
  // SampleRows of logits [rows, row_stride] by the step's rules into the
  // step's id room, on the device.
  [[nodiscard]] virtual absl::Status SampleStep(DeviceFloats logits,
                                                int64_t row_stride,
                                                int64_t vocab,
                                                DeviceStep& step) = 0;
  // The ids SampleStep wrote, on the host (waits for the step).
  [[nodiscard]] virtual absl::Status CopyStepIds(const DeviceStep& step,
                                                 absl::Span<int32_t> ids) = 0;

  // ---- recorded work
  // Whether Capture can record at all (CUDA; not the CPU).
  virtual bool records_graphs() const { return false; }
  // Records the work `work` queues as a graph instead of running it; the
  // work must not wait for the device nor copy from the host. UNIMPLEMENTED
  // on a device without graphs (the CPU); the device's error when the work
  // cannot be recorded (it then ran nothing).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceGraph>> Capture(
      absl::FunctionRef<absl::Status()> work) {
    (void)work;
    return absl::UnimplementedError(
        absl::StrCat("device ", name(), " records no graphs"));
  }
  // Queues a recorded graph of this device.
  [[nodiscard]] virtual absl::Status Launch(const DeviceGraph& graph) {
    (void)graph;
    return absl::UnimplementedError(
        absl::StrCat("device ", name(), " records no graphs"));
  }
  // Changes whenever a buffer that recorded work may read moves (a scratch
  // block of the device grew): a graph recorded before is stale then.
  virtual int64_t layout_generation() const { return 0; }

  // ---- operations
  // out[i, :] = scale · table[ids[i], :] as f32 (ids on the host, < table
  // rows; the scale is Granite-4.0-H's embedding multiplier, 1 elsewhere).
  [[nodiscard]] virtual absl::Status Embedding(absl::Span<const int32_t> ids,
                                               const DeviceMatrix& table,
                                               float scale,
                                               DeviceFloats out) = 0;
  // kernels/rms_norm.h.
  [[nodiscard]] virtual absl::Status RmsNorm(DeviceFloats x, int64_t rows,
                                             int64_t dim, DeviceFloats weight,
                                             float eps, DeviceFloats y) = 0;
  // y [rows, W.rows] = x [rows, W.cols] · W^T (kernels/linear.h), with the
  // epilogue's bias and accumulation.
  [[nodiscard]] virtual absl::Status Linear(DeviceFloats x, int64_t rows,
                                            const DeviceMatrix& weight,
                                            DeviceFloats y,
                                            const LinearEpilogue& epilogue) = 0;
  [[nodiscard]] absl::Status Linear(DeviceFloats x, int64_t rows,
                                    const DeviceMatrix& weight,
                                    DeviceFloats y) {
    return Linear(x, rows, weight, y, LinearEpilogue{});
  }
  // Several products of one input x [rows, k] (an attention layer's q, k
  // and v, an MLP's gate and up), in order, each as Linear computes it; a
  // device that converts x for its GEMMs (CUDA: to bf16) does so once.
  [[nodiscard]] virtual absl::Status Linears(
      DeviceFloats x, int64_t rows, absl::Span<const LinearOutput> outputs) = 0;
  // y = RmsNorm(x) as RmsNorm computes it, then `outputs` of y as Linears
  // computes them: a layer's norm and its first products. A device that
  // converts a GEMM's input (CUDA: to bf16) writes that form in the norm's
  // own pass instead of reading y again: one kernel and one read of the
  // rows fewer per norm.
  [[nodiscard]] virtual absl::Status RmsNormLinears(
      DeviceFloats x, int64_t rows, int64_t dim, DeviceFloats weight, float eps,
      DeviceFloats y, absl::Span<const LinearOutput> outputs) = 0;
  // a [rows, cols] = the activation as SiluMul / ReluSquared / Gelu compute
  // it (a may be act.in for the last two), then Linear(a, rows, weight, y,
  // epilogue): an MLP's activation and second product. A device that
  // converts a GEMM's input (CUDA: to bf16) writes that form straight from
  // the activation and leaves `a` unwritten: one kernel, and one f32 write
  // and read of the rows, fewer.
  [[nodiscard]] virtual absl::Status ActivationLinear(
      const MlpActivation& act, DeviceFloats a, const DeviceMatrix& weight,
      DeviceFloats y, const LinearEpilogue& epilogue) = 0;
  // kernels/causal_conv1d.h.
  [[nodiscard]] virtual absl::Status CausalConv1d(
      DeviceFloats x, int64_t tokens, int64_t channels, int64_t x_stride,
      DeviceFloats weight, int64_t kernel_size, DeviceFloats tail,
      DeviceFloats out) = 0;
  // kernels/ssm_gating.h.
  [[nodiscard]] virtual absl::Status BiasSiluRows(DeviceFloats x, int64_t rows,
                                                  DeviceFloats bias) = 0;
  [[nodiscard]] virtual absl::Status SoftplusBiasRows(DeviceFloats raw,
                                                      int64_t rows,
                                                      int64_t stride,
                                                      DeviceFloats bias,
                                                      DeviceFloats out) = 0;
  [[nodiscard]] virtual absl::Status GatedGroupRmsNorm(
      DeviceFloats z, int64_t z_stride, DeviceFloats y, int64_t rows,
      int64_t width, int64_t groups, DeviceFloats weight, double eps,
      DeviceFloats out) = 0;
  // kernels/ssd_chunk_scan.h SsdChunkScan.
  [[nodiscard]] virtual absl::Status SsdChunkScan(
      const kernels::SsdShape& shape, int64_t tokens, int64_t chunk,
      DeviceFloats x, int64_t x_stride, DeviceFloats b, DeviceFloats c,
      int64_t bc_stride, DeviceFloats dt, DeviceFloats a, DeviceFloats d,
      DeviceFloats state, DeviceFloats y) = 0;
  // ---- prefill passes of several sequences
  // `segments` (kernels::CheckPassSegments over `rows` pass rows and
  // `slots` slots) for every layer of the pass. The default keeps the
  // host copy only.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DevicePassSegments>>
  UploadPassSegments(absl::Span<const kernels::PassSegment> segments,
                     int64_t rows, int64_t slots);
  // CausalConv1d of each segment's rows of x and out (the pass's rows)
  // with its slot's tail of `tails` [slots, (K - 1)·channels]; SsdChunkScan
  // of each segment's rows with its slot's state of `states` [slots,
  // H·P·N]; LinearAttention (no encoder) of each segment's rows with its
  // slot's kv_states [slots, H, hd, D] and k_states [slots, H, D]. The
  // defaults call the one-sequence forms segment by segment; a device
  // overrides them to run all segments in one launch.
  [[nodiscard]] virtual absl::Status CausalConv1dSegments(
      DeviceFloats x, int64_t channels, int64_t x_stride, DeviceFloats weight,
      int64_t kernel_size, DeviceFloats tails,
      const DevicePassSegments& segments, DeviceFloats out);
  [[nodiscard]] virtual absl::Status SsdChunkScanSegments(
      const kernels::SsdShape& shape, int64_t chunk, DeviceFloats x,
      int64_t x_stride, DeviceFloats b, DeviceFloats c, int64_t bc_stride,
      DeviceFloats dt, DeviceFloats a, DeviceFloats d, DeviceFloats states,
      const DevicePassSegments& segments, DeviceFloats y);
  [[nodiscard]] virtual absl::Status LinearAttentionSegments(
      DeviceFloats q, DeviceFloats k, DeviceFloats v,
      const kernels::TaylorAttentionDims& dims, float eps,
      DeviceFloats kv_states, DeviceFloats k_states,
      const DevicePassSegments& segments, DeviceFloats y);
  // WindowAttention of each segment's rows: q | k | v at columns 0, H·hd,
  // 2·H·hd of qkv's rows (q, k rotated in place at the segment's
  // positions) after the last L keys of its slot's ring_k, ring_v [slots,
  // L, H·hd] (row p mod L: position p; L = dims.window), into y; the rings
  // then end with each segment's last keys. `context` is workspace of
  // 2·(L + longest segment)·H·hd floats where a device gathers keys.
  [[nodiscard]] virtual absl::Status WindowAttentionSegments(
      DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
      float rope_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
      const DevicePassSegments& segments, DeviceFloats context, DeviceFloats y);
  // kernels/slot_steps.h: one decode step for every row of `slots`, each
  // on its slot's state in `tails` / `states` ([capacity, ...]).
  [[nodiscard]] virtual absl::Status CausalConv1dStepSlots(
      DeviceFloats x, int64_t channels, int64_t x_stride, DeviceFloats weight,
      int64_t kernel_size, DeviceFloats tails, const DeviceSlotMap& slots,
      DeviceFloats out) = 0;
  [[nodiscard]] virtual absl::Status SsdStepSlots(
      const kernels::SsdShape& shape, DeviceFloats x, int64_t x_stride,
      DeviceFloats b, DeviceFloats c, int64_t bc_stride, DeviceFloats dt,
      DeviceFloats a, DeviceFloats d, DeviceFloats states,
      const DeviceSlotMap& slots, DeviceFloats y) = 0;
  // kernels/rope.h RopeRotateHalf (in place).
  [[nodiscard]] virtual absl::Status RopeRotateHalf(
      DeviceFloats x, int64_t rows, int64_t row_stride, int64_t heads,
      int64_t head_dim, int64_t start_pos, float base) = 0;
  // kernels/rope.h RopeRotateHalfAt: the step's rows, each at its map
  // position.
  [[nodiscard]] virtual absl::Status RopeRotateHalfAt(
      DeviceFloats x, int64_t row_stride, int64_t heads, int64_t head_dim,
      const DeviceSlotMap& step, float base) = 0;
  // kernels/paged_attention.h for the pass's rows; dims.table_width is the
  // table's width.
  [[nodiscard]] virtual absl::Status PagedKvWrite(
      DeviceFloats k, int64_t k_stride, DeviceFloats v, int64_t v_stride,
      const DevicePassRows& rows, const kernels::PagedKvDims& dims,
      const DeviceBlockTable& table, DeviceFloats k_pool,
      DeviceFloats v_pool) = 0;
  [[nodiscard]] virtual absl::Status PagedAttention(
      DeviceFloats q, int64_t q_stride, const DevicePassRows& rows,
      const kernels::PagedKvDims& dims, const DeviceBlockTable& table,
      DeviceFloats k_pool, DeviceFloats v_pool, float scale,
      DeviceFloats y) = 0;
  // kernels/activations.h (an MLP's activation: ActivationLinear).
  [[nodiscard]] virtual absl::Status SiluMul(
      DeviceFloats gate, int64_t gate_stride, DeviceFloats mult,
      int64_t mult_stride, int64_t rows, int64_t cols, DeviceFloats out) = 0;
  // kernels/top_k_routing.h: the rows of every expert out of src [*, cols]
  // into dst [rows·k, cols]; x [rows, cols] += scale · (base + the gated
  // expert rows of `routed` [rows·k, cols]).
  [[nodiscard]] virtual absl::Status GatherRows(DeviceFloats src, int64_t cols,
                                                const DeviceRoutes& routes,
                                                DeviceFloats dst) = 0;
  [[nodiscard]] virtual absl::Status CombineRoutedRows(
      DeviceFloats base, DeviceFloats routed, int64_t cols,
      const DeviceRoutes& routes, float scale, DeviceFloats x) = 0;
  // ---- a mixture of experts routed on the device (a decode step's: the
  // host is not needed in the middle of the pass, so the step can be
  // recorded). Pairs p = r·k + j are row r's j-th expert, ascending.
  // `matrices` (one shape, at least one) as a table RoutedLinear indexes.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<DeviceMatrixTable>>
  UploadMatrixTable(absl::Span<const DeviceMatrix* const> matrices) = 0;
  // kernels/top_k_routing.h RouteTopKPairs: logits [rows, experts] into
  // pair_experts (expert indices as floats) and pair_gates [rows·k]; the
  // step's padding rows take no expert.
  [[nodiscard]] virtual absl::Status RouteTopKPairs(
      DeviceFloats logits, int64_t rows, int64_t experts, int64_t top_k,
      const StepPadRows& padding, DeviceFloats pair_experts,
      DeviceFloats pair_gates) = 0;
  // y [pairs, W rows] = x[p / x_group, :] · W_{e_p}^T, e_p the pair's
  // expert in pair_experts (a row of zeros for kernels::kNoExpert), for x
  // [pairs / x_group, W cols]: the routed rows' products (the CPU runs
  // each expert's pairs through one Linear; CUDA reads each used expert's
  // bf16 weights once, x rounded to bf16 as a GEMM's input, f32 sums).
  [[nodiscard]] virtual absl::Status RoutedLinear(
      DeviceFloats x, int64_t x_group, const DeviceMatrixTable& weights,
      DeviceFloats pair_experts, int64_t pairs, DeviceFloats y) = 0;
  // kernels/top_k_routing.h CombineRoutedPairs: x [rows, cols] += scale ·
  // (base + the rows' gated pair results of `routed` [rows·k, cols]).
  [[nodiscard]] virtual absl::Status CombineRoutedPairs(
      DeviceFloats base, DeviceFloats routed, int64_t cols, int64_t rows,
      int64_t top_k, DeviceFloats pair_gates, float scale, DeviceFloats x) = 0;

  // kernels/rat_paged.h for the pass's rows: a prefill pass's sequence in
  // slot `prefill_slot` of `open`, a step's rows in their map's slots;
  // dims.table_width is the table's.
  [[nodiscard]] virtual absl::Status RatChunkScan(
      DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
      const DevicePassRows& rows, int32_t prefill_slot,
      const kernels::RatPagedDims& dims, const DeviceBlockTable& table,
      DeviceFloats open, DeviceFloats closed, DeviceFloats q_out,
      DeviceFloats k_out, DeviceFloats v_out, DeviceFloats z_out) = 0;
  // RatChunkScan's prefill form for every segment of a pass (its rows at
  // their positions, its slot's open state), segment i's closed chunks
  // through row first_row of `row_table`, a table with a row per pass row
  // (ResidentPass::row_kv_tables); dims.table_width is its width.
  [[nodiscard]] virtual absl::Status RatChunkScanSegments(
      DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
      const DevicePassSegments& segments, const kernels::RatPagedDims& dims,
      const DeviceBlockTable& row_table, DeviceFloats open, DeviceFloats closed,
      DeviceFloats q_out, DeviceFloats k_out, DeviceFloats v_out,
      DeviceFloats z_out) = 0;
  [[nodiscard]] virtual absl::Status RatPagedAttention(
      DeviceFloats q, DeviceFloats own_k, DeviceFloats own_v, DeviceFloats z,
      const DevicePassRows& rows, const kernels::RatPagedDims& dims,
      const DeviceBlockTable& table, DeviceFloats closed, float scale,
      DeviceFloats out) = 0;
  // kernels/taylor_linear_attention.h: `tokens` raw q, k [T, H, F] and
  // v [T, H, hd] of one sequence, after the E encoder keys k_enc [E, H, F]
  // and values v_enc [E, H, hd] (E = 0: none; JRT-RNN's prefix), into its
  // state kv [H, hd, D], k_sum [H, D]; y [T, H, hd].
  [[nodiscard]] virtual absl::Status LinearAttention(
      DeviceFloats q, DeviceFloats k, DeviceFloats v, int64_t tokens,
      DeviceFloats k_enc, DeviceFloats v_enc, int64_t encoder_tokens,
      const kernels::TaylorAttentionDims& dims, float eps, DeviceFloats kv,
      DeviceFloats k_sum, DeviceFloats y) = 0;
  // kernels/window_attention.h.
  [[nodiscard]] virtual absl::Status WindowAttention(
      DeviceFloats q, int64_t q_stride, DeviceFloats k, DeviceFloats v,
      const kernels::WindowAttentionDims& dims, float scale,
      DeviceFloats out) = 0;
  // kernels/slot_steps.h: the Based decode steps, each row on its slot's
  // state (the map's positions are the window step's).
  [[nodiscard]] virtual absl::Status LinearAttentionStepSlots(
      DeviceFloats q, DeviceFloats k, DeviceFloats v,
      const kernels::TaylorAttentionDims& dims, float eps,
      DeviceFloats kv_states, DeviceFloats k_states, const DeviceSlotMap& slots,
      DeviceFloats y) = 0;
  [[nodiscard]] virtual absl::Status WindowAttentionStepSlots(
      DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
      float rotary_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
      const DeviceSlotMap& slots, DeviceFloats y) = 0;
};

// The checks every device runs on UploadSlotMap's and CopyRows's arguments
// (INVALID_ARGUMENT: one position per slot, positions >= 0; a table a
// whole number of rows of width >= 1; strides >= cols and both views
// holding `rows` strided rows).
[[nodiscard]] absl::Status CheckSlotMap(absl::Span<const int32_t> slots,
                                        absl::Span<const int64_t> positions);
[[nodiscard]] absl::Status CheckBlockTable(absl::Span<const int32_t> table,
                                           int64_t width);
// FillBlockTable's checks (CheckBlockTable, the table's row count, width
// <= the table's), then `rows` padded with -1 to the table's width.
[[nodiscard]] absl::StatusOr<std::vector<int32_t>> PaddedTableRows(
    const DeviceBlockTable& table, absl::Span<const int32_t> rows,
    int64_t width);
// `dims` with the table's width (what the paged operations pass on).
kernels::PagedKvDims WithTableWidth(kernels::PagedKvDims dims,
                                    const DeviceBlockTable& table);
kernels::RatPagedDims WithTableWidth(kernels::RatPagedDims dims,
                                     const DeviceBlockTable& table);
// FillStep's checks: one id, slot, position and rule per row of the step
// (CheckSlotMap, kernels::ValidateSamplingRule).
[[nodiscard]] absl::Status CheckStepInputs(
    int64_t rows, absl::Span<const int32_t> ids,
    absl::Span<const int32_t> slots, absl::Span<const int64_t> positions,
    absl::Span<const kernels::SamplingRule> rules);
// UploadMatrixTable's check: at least one matrix, all of one shape.
[[nodiscard]] absl::Status CheckMatrixTable(
    absl::Span<const DeviceMatrix* const> matrices);
// INVALID_ARGUMENT naming the first copy whose sizes differ.
[[nodiscard]] absl::Status CheckHostCopies(absl::Span<const HostCopy> copies);
[[nodiscard]] absl::Status CheckCopyRows(DeviceFloats src, int64_t src_stride,
                                         DeviceFloats dst, int64_t dst_stride,
                                         int64_t rows, int64_t cols);

// The host as an executor device.
std::unique_ptr<ExecutorDevice> NewCpuExecutorDevice();

// The CUDA device `ordinal` (cuda_executor_device.cc); FAILED_PRECONDITION
// in a build without CUDA or on a machine without a usable GPU.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ExecutorDevice>>
NewCudaExecutorDevice(int ordinal = 0);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_EXECUTOR_DEVICE_H_
