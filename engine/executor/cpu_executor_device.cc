// The host as an ExecutorDevice: arrays are host vectors, matrices are the
// loaded tensors themselves (memory-mapped or converted at load, never
// copied again; the handles are in cpu_device_arrays.h), and every
// operation is the kernels/ entry point.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/executor/cpu_device_arrays.h"
#include "engine/executor/executor_device.h"
#include "kernels/activations.h"
#include "kernels/causal_conv1d.h"
#include "kernels/check.h"
#include "kernels/linear.h"
#include "kernels/paged_attention.h"
#include "kernels/pass_segments.h"
#include "kernels/rat_paged.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/slot_steps.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/ssm_gating.h"
#include "kernels/status_macros.h"
#include "kernels/taylor_linear_attention.h"
#include "kernels/tensor_convert.h"
#include "kernels/top_k_routing.h"
#include "kernels/window_attention.h"

namespace twice::engine {
namespace {

using cpu_executor::Host;
using cpu_executor::HostArray;
using cpu_executor::HostBlockTable;
using cpu_executor::HostMatrix;
using cpu_executor::HostMatrixTable;
using cpu_executor::HostRoutes;
using cpu_executor::HostSlotMap;
using cpu_executor::HostStep;
using cpu_executor::PagedRowsOf;
using cpu_executor::TensorOf;

class CpuExecutorDevice final : public ExecutorDevice {
 public:
  std::string name() const override { return "cpu"; }
  DeviceTraffic traffic() const override { return traffic_; }

  absl::StatusOr<std::unique_ptr<DeviceArray>> Allocate(
      int64_t floats) override {
    if (floats < 0) return absl::InvalidArgumentError("Allocate: floats < 0");
    return HostArray::Create(floats);
  }
  absl::Status Zero(DeviceFloats x) override {
    std::fill_n(x.data, x.size, 0.0f);
    return absl::OkStatus();
  }
  absl::Status CopyToDevice(absl::Span<const float> host,
                            DeviceFloats device) override {
    if (static_cast<int64_t>(host.size()) != device.size) {
      return absl::InvalidArgumentError("CopyToDevice: size mismatch");
    }
    std::memcpy(device.data, host.data(), host.size() * sizeof(float));
    traffic_.bytes_to_device += device.size * int64_t{sizeof(float)};
    return absl::OkStatus();
  }
  absl::Status CopyAllToHost(absl::Span<const HostCopy> copies) override {
    TWICE_RETURN_IF_ERROR(CheckHostCopies(copies));
    for (const HostCopy& c : copies) {
      if (c.from.size == 0) continue;  // memcpy from null is undefined
      std::memcpy(c.to.data(), c.from.data, c.to.size() * sizeof(float));
      traffic_.bytes_to_host += c.from.size * int64_t{sizeof(float)};
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceSlotMap>> UploadSlotMap(
      absl::Span<const int32_t> slots,
      absl::Span<const int64_t> positions) override {
    TWICE_RETURN_IF_ERROR(CheckSlotMap(slots, positions));
    return std::make_unique<HostSlotMap>(slots, positions);
  }
  absl::Status CopyRows(DeviceFloats src, int64_t src_stride, DeviceFloats dst,
                        int64_t dst_stride, int64_t rows,
                        int64_t cols) override {
    TWICE_RETURN_IF_ERROR(
        CheckCopyRows(src, src_stride, dst, dst_stride, rows, cols));
    for (int64_t r = 0; r < rows; ++r) {
      std::memmove(dst.data + r * dst_stride, src.data + r * src_stride,
                   static_cast<size_t>(cols) * sizeof(float));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceBlockTable>> UploadBlockTable(
      absl::Span<const int32_t> table, int64_t width) override {
    TWICE_RETURN_IF_ERROR(CheckBlockTable(table, width));
    return std::make_unique<HostBlockTable>(table, width);
  }
  absl::Status FillBlockTable(DeviceBlockTable& table,
                              absl::Span<const int32_t> rows,
                              int64_t width) override {
    TWICE_ASSIGN_OR_RETURN(std::vector<int32_t> padded,
                           PaddedTableRows(table, rows, width));
    static_cast<HostBlockTable&>(table).set_blocks(std::move(padded));
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceRoutes>> UploadRoutes(
      kernels::TopKRoutes routes) override {
    TWICE_RETURN_IF_ERROR(kernels::CheckRoutes(routes));
    return std::make_unique<HostRoutes>(std::move(routes));
  }
  absl::StatusOr<std::unique_ptr<DeviceMatrix>> UploadMatrix(
      const kernels::Tensor& weight) override {
    if (weight.rank() < 2 || weight.dim(0) < 1) {
      return absl::InvalidArgumentError(
          "UploadMatrix: a matrix needs rank >= 2 and rows");
    }
    return std::make_unique<HostMatrix>(weight);
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<std::unique_ptr<DeviceStep>> NewStep(int64_t rows) override {
    if (rows < 1) return absl::InvalidArgumentError("NewStep: rows < 1");
    return std::make_unique<HostStep>(rows);
  }
  absl::Status FillStep(
      DeviceStep& step, absl::Span<const int32_t> ids,
      absl::Span<const int32_t> slots, absl::Span<const int64_t> positions,
      absl::Span<const kernels::SamplingRule> rules) override {
    TWICE_RETURN_IF_ERROR(
        CheckStepInputs(step.rows(), ids, slots, positions, rules));
    static_cast<HostStep&>(step).Fill(ids, slots, positions, rules);
    return absl::OkStatus();
  }
  absl::Status EmbedStep(const DeviceStep& step, const DeviceMatrix& table,
                         float scale, DeviceFloats out) override {
    if (static_cast<int64_t>(step.token_ids().size()) != step.rows()) {
      return absl::FailedPreconditionError("EmbedStep: the step is not filled");
    }
    return Embedding(step.token_ids(), table, scale, out);
  }
  absl::Status SampleStep(DeviceFloats logits, int64_t row_stride,
                          int64_t vocab, DeviceStep& step) override {
    auto& host = static_cast<HostStep&>(step);
    if (static_cast<int64_t>(host.rules().size()) != step.rows()) {
      return absl::FailedPreconditionError(
          "SampleStep: the step is not filled");
    }
    return kernels::SampleRows(Host(logits), step.rows(), row_stride, vocab,
                               host.rules(), host.sampled());
  }
  absl::Status CopyStepIds(const DeviceStep& step,
                           absl::Span<int32_t> ids) override {
    const absl::Span<const int32_t> sampled =
        static_cast<const HostStep&>(step).sampled();
    if (ids.size() != sampled.size()) {
      return absl::InvalidArgumentError("CopyStepIds: one id per row");
    }
    std::copy(sampled.begin(), sampled.end(), ids.begin());
    traffic_.bytes_to_host +=
        static_cast<int64_t>(ids.size() * sizeof(int32_t));
    return absl::OkStatus();
  }

  absl::Status Embedding(absl::Span<const int32_t> ids,
                         const DeviceMatrix& table, float scale,
                         DeviceFloats out) override {
    const int64_t dim = table.cols();
    if (out.size != static_cast<int64_t>(ids.size()) * dim) {
      return absl::InvalidArgumentError("Embedding: out size mismatch");
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= table.rows()) {
        return absl::InvalidArgumentError("Embedding: id out of range");
      }
      kernels::RowToF32(TensorOf(table), ids[i], out.data + i * dim);
    }
    if (scale != 1.0f) {
      for (int64_t i = 0; i < out.size; ++i) out.data[i] *= scale;
    }
    return absl::OkStatus();
  }
  absl::Status RmsNorm(DeviceFloats x, int64_t rows, int64_t dim,
                       DeviceFloats weight, float eps,
                       DeviceFloats y) override {
    return kernels::RmsNorm(Host(x), rows, dim, Host(weight), eps, Host(y));
  }
  absl::Status Linear(DeviceFloats x, int64_t rows, const DeviceMatrix& weight,
                      DeviceFloats y, const LinearEpilogue& epilogue) override {
    const absl::Span<const float> bias = Host(epilogue.bias);
    const float scale = epilogue.scale;
    if (!epilogue.accumulate) {
      TWICE_RETURN_IF_ERROR(kernels::Linear(Host(x), rows, weight.cols(),
                                            TensorOf(weight), weight.rows(),
                                            bias, Host(y)));
      if (scale != 1.0f) {
        for (int64_t i = 0; i < y.size; ++i) y.data[i] *= scale;
      }
      return absl::OkStatus();
    }
    // The product then the scaled add, as a host model adds its residual.
    product_.resize(static_cast<size_t>(std::max<int64_t>(y.size, 0)));
    TWICE_RETURN_IF_ERROR(kernels::Linear(Host(x), rows, weight.cols(),
                                          TensorOf(weight), weight.rows(), bias,
                                          absl::MakeSpan(product_)));
    for (int64_t i = 0; i < y.size; ++i) y.data[i] += scale * product_[i];
    return absl::OkStatus();
  }
  absl::Status ActivationLinear(const MlpActivation& act, DeviceFloats a,
                                const DeviceMatrix& weight, DeviceFloats y,
                                const LinearEpilogue& epilogue) override {
    if (act.kind == kernels::MlpActivationKind::kSiluMul) {
      TWICE_RETURN_IF_ERROR(SiluMul(act.in, act.in_stride, act.mult,
                                    act.mult_stride, act.rows, act.cols, a));
    } else {
      TWICE_RETURN_IF_ERROR(
          CopyRows(act.in, act.in_stride, a, act.cols, act.rows, act.cols));
      const absl::Span<float> rows = Host(a.sub(0, act.rows * act.cols));
      if (act.kind == kernels::MlpActivationKind::kGelu) {
        kernels::Gelu(rows);
      } else {
        kernels::ReluSquared(rows);
      }
    }
    return Linear(a, act.rows, weight, y, epilogue);
  }
  absl::Status Linears(DeviceFloats x, int64_t rows,
                       absl::Span<const LinearOutput> outputs) override {
    for (const LinearOutput& o : outputs) {
      if (o.weight == nullptr) {
        return absl::InvalidArgumentError("Linears: an output has no weight");
      }
      TWICE_RETURN_IF_ERROR(Linear(x, rows, *o.weight, o.y, o.epilogue));
    }
    return absl::OkStatus();
  }
  absl::Status RmsNormLinears(DeviceFloats x, int64_t rows, int64_t dim,
                              DeviceFloats weight, float eps, DeviceFloats y,
                              absl::Span<const LinearOutput> outputs) override {
    TWICE_RETURN_IF_ERROR(RmsNorm(x, rows, dim, weight, eps, y));
    return Linears(y, rows, outputs);
  }
  absl::Status CausalConv1d(DeviceFloats x, int64_t tokens, int64_t channels,
                            int64_t x_stride, DeviceFloats weight,
                            int64_t kernel_size, DeviceFloats tail,
                            DeviceFloats out) override {
    return kernels::CausalConv1d(Host(x), tokens, channels, x_stride,
                                 Host(weight), kernel_size, Host(tail),
                                 Host(out));
  }
  absl::Status BiasSiluRows(DeviceFloats x, int64_t rows,
                            DeviceFloats bias) override {
    return kernels::BiasSiluRows(Host(x), rows, Host(bias));
  }
  absl::Status SoftplusBiasRows(DeviceFloats raw, int64_t rows, int64_t stride,
                                DeviceFloats bias, DeviceFloats out) override {
    return kernels::SoftplusBiasRows(Host(raw), rows, stride, Host(bias),
                                     Host(out));
  }
  absl::Status GatedGroupRmsNorm(DeviceFloats z, int64_t z_stride,
                                 DeviceFloats y, int64_t rows, int64_t width,
                                 int64_t groups, DeviceFloats weight,
                                 double eps, DeviceFloats out) override {
    return kernels::GatedGroupRmsNorm(Host(z), z_stride, Host(y), rows, width,
                                      groups, Host(weight), eps, Host(out));
  }
  absl::Status SsdChunkScan(const kernels::SsdShape& shape, int64_t tokens,
                            int64_t chunk, DeviceFloats x, int64_t x_stride,
                            DeviceFloats b, DeviceFloats c, int64_t bc_stride,
                            DeviceFloats dt, DeviceFloats a, DeviceFloats d,
                            DeviceFloats state, DeviceFloats y) override {
    return kernels::SsdChunkScan(shape, tokens, chunk, Host(x), x_stride,
                                 Host(b), Host(c), bc_stride, Host(dt), Host(a),
                                 Host(d), Host(state), Host(y));
  }
  absl::Status CausalConv1dStepSlots(DeviceFloats x, int64_t channels,
                                     int64_t x_stride, DeviceFloats weight,
                                     int64_t kernel_size, DeviceFloats tails,
                                     const DeviceSlotMap& slots,
                                     DeviceFloats out) override {
    return kernels::CausalConv1dStepSlots(
        Host(x), channels, x_stride, Host(weight), kernel_size, Host(tails),
        slots.slots(), Host(out));
  }
  absl::Status SsdStepSlots(const kernels::SsdShape& shape, DeviceFloats x,
                            int64_t x_stride, DeviceFloats b, DeviceFloats c,
                            int64_t bc_stride, DeviceFloats dt, DeviceFloats a,
                            DeviceFloats d, DeviceFloats states,
                            const DeviceSlotMap& slots,
                            DeviceFloats y) override {
    return kernels::SsdStepSlots(shape, Host(x), x_stride, Host(b), Host(c),
                                 bc_stride, Host(dt), Host(a), Host(d),
                                 Host(states), slots.slots(), Host(y));
  }
  absl::Status RopeRotateHalf(DeviceFloats x, int64_t rows, int64_t row_stride,
                              int64_t heads, int64_t head_dim,
                              int64_t start_pos, float base) override {
    return kernels::RopeRotateHalf(Host(x), rows, row_stride, heads, head_dim,
                                   start_pos, base);
  }
  absl::Status RopeRotateHalfAt(DeviceFloats x, int64_t row_stride,
                                int64_t heads, int64_t head_dim,
                                const DeviceSlotMap& step,
                                float base) override {
    return kernels::RopeRotateHalfAt(
        Host(x), static_cast<int64_t>(step.positions().size()), row_stride,
        heads, head_dim, step.positions(), base);
  }
  absl::Status PagedKvWrite(DeviceFloats k, int64_t k_stride, DeviceFloats v,
                            int64_t v_stride, const DevicePassRows& rows,
                            const kernels::PagedKvDims& dims,
                            const DeviceBlockTable& table, DeviceFloats k_pool,
                            DeviceFloats v_pool) override {
    return kernels::PagedKvWrite(Host(k), k_stride, Host(v), v_stride,
                                 PagedRowsOf(rows), WithTableWidth(dims, table),
                                 table.blocks(), Host(k_pool), Host(v_pool));
  }
  absl::Status PagedAttention(DeviceFloats q, int64_t q_stride,
                              const DevicePassRows& rows,
                              const kernels::PagedKvDims& dims,
                              const DeviceBlockTable& table,
                              DeviceFloats k_pool, DeviceFloats v_pool,
                              float scale, DeviceFloats y) override {
    return kernels::PagedCausalAttention(
        Host(q), q_stride, PagedRowsOf(rows), WithTableWidth(dims, table),
        table.blocks(), Host(k_pool), Host(v_pool), scale, Host(y));
  }
  absl::Status SiluMul(DeviceFloats gate, int64_t gate_stride,
                       DeviceFloats mult, int64_t mult_stride, int64_t rows,
                       int64_t cols, DeviceFloats out) override {
    return kernels::SiluMul(Host(gate), gate_stride, Host(mult), mult_stride,
                            rows, cols, Host(out));
  }
  absl::Status RatChunkScan(DeviceFloats proj, int64_t proj_stride,
                            DeviceFloats gate_bias, const DevicePassRows& rows,
                            int32_t prefill_slot,
                            const kernels::RatPagedDims& dims,
                            const DeviceBlockTable& table, DeviceFloats open,
                            DeviceFloats closed, DeviceFloats q_out,
                            DeviceFloats k_out, DeviceFloats v_out,
                            DeviceFloats z_out) override {
    const int32_t prefill[] = {prefill_slot};
    return kernels::RatChunkScan(
        Host(proj), proj_stride, Host(gate_bias), PagedRowsOf(rows),
        rows.step != nullptr ? rows.step->slots()
                             : absl::Span<const int32_t>(prefill),
        WithTableWidth(dims, table), table.blocks(), Host(open), Host(closed),
        Host(q_out), Host(k_out), Host(v_out), Host(z_out));
  }
  absl::Status RatChunkScanSegments(
      DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
      const DevicePassSegments& segments, const kernels::RatPagedDims& dims,
      const DeviceBlockTable& row_table, DeviceFloats open, DeviceFloats closed,
      DeviceFloats q_out, DeviceFloats k_out, DeviceFloats v_out,
      DeviceFloats z_out) override {
    constexpr char kOp[] = "RatChunkScanSegments";
    const int64_t d = dims.dim, width = row_table.width();
    const int64_t rows = segments.rows(), w = dims.proj_width();
    TWICE_RETURN_IF_ERROR(kernels::CheckArg(d >= 1 && open.size % (2 * d) == 0,
                                            kOp, "open is not [slots, 2, D]"));
    // The views the segments' spans are cut from, whole before any runs.
    TWICE_RETURN_IF_ERROR(
        kernels::CheckArg(proj_stride >= w, kOp, "proj_stride < 3D + 2 G hd"));
    TWICE_RETURN_IF_ERROR(kernels::CheckAtLeast(
        kOp, "proj", proj.size, kernels::StridedExtent(rows, w, proj_stride)));
    for (const DeviceFloats& out : {q_out, k_out, v_out, z_out}) {
      TWICE_RETURN_IF_ERROR(
          kernels::CheckSize(kOp, "an output", out.size, rows * d));
    }
    TWICE_RETURN_IF_ERROR(kernels::CheckPassSegments(
        kOp, segments.segments(), segments.rows(), open.size / (2 * d)));
    const absl::Span<const int32_t> table = row_table.blocks();
    TWICE_RETURN_IF_ERROR(kernels::CheckSize(kOp, "the row table",
                                             static_cast<int64_t>(table.size()),
                                             rows * width));
    // Each segment as RatChunkScan's prefill form, with its table row.
    for (const kernels::PassSegment& seg : segments.segments()) {
      const int32_t slot[] = {static_cast<int32_t>(seg.slot)};
      const int64_t first = seg.first_row;
      TWICE_RETURN_IF_ERROR(kernels::RatChunkScan(
          Host(proj).subspan(first * proj_stride), proj_stride, Host(gate_bias),
          kernels::PagedRows{seg.rows, seg.start, {}}, slot,
          WithTableWidth(dims, row_table), table.subspan(first * width, width),
          Host(open), Host(closed), Host(q_out.sub(first * d, seg.rows * d)),
          Host(k_out.sub(first * d, seg.rows * d)),
          Host(v_out.sub(first * d, seg.rows * d)),
          Host(z_out.sub(first * d, seg.rows * d))));
    }
    return absl::OkStatus();
  }
  absl::Status GatherRows(DeviceFloats src, int64_t cols,
                          const DeviceRoutes& routes,
                          DeviceFloats dst) override {
    return kernels::GatherRows(Host(src), cols, routes.routes().source_row,
                               Host(dst));
  }
  absl::Status CombineRoutedRows(DeviceFloats base, DeviceFloats routed,
                                 int64_t cols, const DeviceRoutes& routes,
                                 float scale, DeviceFloats x) override {
    return kernels::CombineRoutedRows(Host(base), Host(routed), cols,
                                      routes.routes(), scale,
                                      /*accumulate=*/true, Host(x));
  }
  absl::StatusOr<std::unique_ptr<DeviceMatrixTable>> UploadMatrixTable(
      absl::Span<const DeviceMatrix* const> matrices) override {
    TWICE_RETURN_IF_ERROR(CheckMatrixTable(matrices));
    return std::make_unique<HostMatrixTable>(matrices);
  }
  absl::Status RouteTopKPairs(DeviceFloats logits, int64_t rows,
                              int64_t experts, int64_t top_k,
                              const StepPadRows& padding,
                              DeviceFloats pair_experts,
                              DeviceFloats pair_gates) override {
    const kernels::PaddingRows pad_rows{padding.step != nullptr
                                            ? padding.step->slots()
                                            : absl::Span<const int32_t>(),
                                        padding.first_slot};
    return kernels::RouteTopKPairs(Host(logits), rows, experts, top_k, pad_rows,
                                   Host(pair_experts), Host(pair_gates));
  }
  // Each expert's pairs gathered in pair order and multiplied in one
  // Linear, as the host layer multiplies each expert's block of rows (so
  // the sums are the host model's).
  absl::Status RoutedLinear(DeviceFloats x, int64_t x_group,
                            const DeviceMatrixTable& weights,
                            DeviceFloats pair_experts, int64_t pairs,
                            DeviceFloats y) override {
    const auto& table = static_cast<const HostMatrixTable&>(weights);
    const int64_t n = table.rows(), k = table.cols();
    if (pairs < 0 || x_group < 1 || pairs % x_group != 0 ||
        x.size != pairs / x_group * k || pair_experts.size != pairs ||
        y.size != pairs * n) {
      return absl::InvalidArgumentError(
          absl::StrCat("RoutedLinear: ", pairs, " pairs of x rows shared by ",
                       x_group, " need x [pairs / x_group, ", k,
                       "], one expert per pair and y "
                       "[pairs, ",
                       n, "]"));
    }
    std::vector<std::vector<int64_t>> of_expert(
        static_cast<size_t>(table.experts()));
    std::vector<int64_t> no_expert;  // zeroed once every pair is checked
    for (int64_t p = 0; p < pairs; ++p) {
      const float e = pair_experts.data[p];
      if (e == kernels::kNoExpert) {
        no_expert.push_back(p);
        continue;
      }
      if (!(e >= 0.0f && e < static_cast<float>(table.experts())) ||
          e != static_cast<float>(static_cast<int64_t>(e))) {
        return absl::InvalidArgumentError(
            absl::StrCat("RoutedLinear: pair ", p, " names expert ", e, " of ",
                         table.experts()));
      }
      of_expert[static_cast<size_t>(e)].push_back(p);
    }
    for (const int64_t p : no_expert) std::fill_n(y.data + p * n, n, 0.0f);
    for (int64_t e = 0; e < table.experts(); ++e) {
      const std::vector<int64_t>& list = of_expert[static_cast<size_t>(e)];
      if (list.empty()) continue;
      const int64_t count = static_cast<int64_t>(list.size());
      routed_in_.resize(static_cast<size_t>(count * k));
      routed_out_.resize(static_cast<size_t>(count * n));
      for (int64_t i = 0; i < count; ++i) {
        std::copy_n(x.data + list[i] / x_group * k, k,
                    routed_in_.data() + i * k);
      }
      TWICE_RETURN_IF_ERROR(kernels::Linear(routed_in_, count, k,
                                            TensorOf(table.matrix(e)), n, {},
                                            absl::MakeSpan(routed_out_)));
      for (int64_t i = 0; i < count; ++i) {
        std::copy_n(routed_out_.data() + i * n, n, y.data + list[i] * n);
      }
    }
    return absl::OkStatus();
  }
  absl::Status CombineRoutedPairs(DeviceFloats base, DeviceFloats routed,
                                  int64_t cols, int64_t rows, int64_t top_k,
                                  DeviceFloats pair_gates, float scale,
                                  DeviceFloats x) override {
    return kernels::CombineRoutedPairs(Host(base), Host(routed), cols, rows,
                                       top_k, Host(pair_gates), scale, Host(x));
  }
  absl::Status RatPagedAttention(DeviceFloats q, DeviceFloats own_k,
                                 DeviceFloats own_v, DeviceFloats z,
                                 const DevicePassRows& rows,
                                 const kernels::RatPagedDims& dims,
                                 const DeviceBlockTable& table,
                                 DeviceFloats closed, float scale,
                                 DeviceFloats out) override {
    return kernels::RatPagedAttention(
        Host(q), Host(own_k), Host(own_v), Host(z), PagedRowsOf(rows),
        WithTableWidth(dims, table), table.blocks(), Host(closed), scale,
        Host(out));
  }
  absl::Status LinearAttention(DeviceFloats q, DeviceFloats k, DeviceFloats v,
                               int64_t tokens, DeviceFloats k_enc,
                               DeviceFloats v_enc, int64_t encoder_tokens,
                               const kernels::TaylorAttentionDims& dims,
                               float eps, DeviceFloats kv, DeviceFloats k_sum,
                               DeviceFloats y) override {
    return kernels::TaylorLinearAttention(
        Host(q), Host(k), Host(v), tokens, Host(k_enc), Host(v_enc),
        encoder_tokens, dims, eps, Host(kv), Host(k_sum), Host(y));
  }
  absl::Status WindowAttention(DeviceFloats q, int64_t q_stride, DeviceFloats k,
                               DeviceFloats v,
                               const kernels::WindowAttentionDims& dims,
                               float scale, DeviceFloats out) override {
    return kernels::WindowAttention(Host(q), q_stride, Host(k), Host(v), dims,
                                    scale, Host(out));
  }
  absl::Status LinearAttentionStepSlots(
      DeviceFloats q, DeviceFloats k, DeviceFloats v,
      const kernels::TaylorAttentionDims& dims, float eps,
      DeviceFloats kv_states, DeviceFloats k_states, const DeviceSlotMap& slots,
      DeviceFloats y) override {
    return kernels::LinearAttentionStepSlots(
        Host(q), Host(k), Host(v), dims, eps, Host(kv_states), Host(k_states),
        slots.slots(), Host(y));
  }
  absl::Status WindowAttentionStepSlots(
      DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
      float rotary_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
      const DeviceSlotMap& slots, DeviceFloats y) override {
    return kernels::WindowAttentionStepSlots(
        Host(qkv), qkv_stride, dims, rotary_base, scale, slots.positions(),
        Host(ring_k), Host(ring_v), slots.slots(), Host(y));
  }

 private:
  DeviceTraffic traffic_;
  std::vector<float> product_;  // an accumulating Linear's product
  std::vector<float> routed_in_, routed_out_;  // one expert's pairs
};

}  // namespace

std::unique_ptr<ExecutorDevice> NewCpuExecutorDevice() {
  return std::make_unique<CpuExecutorDevice>();
}

}  // namespace twice::engine
