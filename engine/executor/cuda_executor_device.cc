// The CUDA device as an ExecutorDevice: arrays are blocks of one caching
// allocator, matrices are bf16 copies made once (weight_upload.h), every
// operation is queued on the device's own stream (no process-wide lock:
// each executor owns its device object), and GEMMs run through its
// cuBLASLt runner with f32 accumulation. A Linear's f32 input is converted
// to bf16 in a scratch block first.
#include "engine/executor/executor_device.h"

#if TWICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/weight_upload.h"
#include "kernels/status_macros.h"
#endif

namespace twice::engine {

#if TWICE_HAVE_CUDA
namespace {

namespace cuda = ::twice::kernels::cuda;

int64_t FloatBytes(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float));
}

cuda::DeviceSpan<float> Span(DeviceFloats x) { return {x.data, x.size}; }
cuda::DeviceSpan<const float> ConstSpan(DeviceFloats x) {
  return {x.data, x.size};
}

class CudaArray final : public DeviceArray {
 public:
  explicit CudaArray(cuda::DeviceBuffer buffer, int64_t floats)
      : buffer_(std::move(buffer)), floats_(floats) {}
  DeviceFloats floats() const override {
    return {static_cast<float*>(buffer_.data()), floats_};
  }

 private:
  cuda::DeviceBuffer buffer_;
  int64_t floats_;
};

class CudaMatrix final : public DeviceMatrix {
 public:
  CudaMatrix(cuda::DeviceBuffer bf16, int64_t rows, int64_t cols)
      : bf16_(std::move(bf16)), rows_(rows), cols_(cols) {}
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  int64_t bytes() const override { return rows_ * cols_ * 2; }
  cuda::DeviceSpan<const cuda::Bf16> values() const {
    return {static_cast<const cuda::Bf16*>(bf16_.data()), rows_ * cols_};
  }

 private:
  cuda::DeviceBuffer bf16_;
  int64_t rows_;
  int64_t cols_;
};

// Slots and positions in one device block: [rows] int64 positions, then
// [rows] int32 slots.
class CudaSlotMap final : public DeviceSlotMap {
 public:
  CudaSlotMap(absl::Span<const int32_t> slots,
              absl::Span<const int64_t> positions, cuda::DeviceBuffer device)
      : slots_(slots.begin(), slots.end()),
        positions_(positions.begin(), positions.end()),
        device_(std::move(device)) {}
  absl::Span<const int32_t> slots() const override { return slots_; }
  absl::Span<const int64_t> positions() const override { return positions_; }
  cuda::DeviceSlotRows rows() const {
    return {slots_,
            {reinterpret_cast<const int32_t*>(device_positions() +
                                              positions_.size()),
             static_cast<int64_t>(slots_.size())}};
  }
  cuda::DeviceSpan<const int64_t> device_positions_span() const {
    return {device_positions(), static_cast<int64_t>(positions_.size())};
  }

 private:
  const int64_t* device_positions() const {
    return static_cast<const int64_t*>(device_.data());
  }
  std::vector<int32_t> slots_;
  std::vector<int64_t> positions_;
  cuda::DeviceBuffer device_;
};

// A block table's entries on the device, with the host copy the checks
// read.
class CudaBlockTable final : public DeviceBlockTable {
 public:
  CudaBlockTable(absl::Span<const int32_t> blocks, int64_t width,
                 cuda::DeviceBuffer device)
      : blocks_(blocks.begin(), blocks.end()),
        width_(width),
        device_(std::move(device)) {}
  absl::Span<const int32_t> blocks() const override { return blocks_; }
  int64_t width() const override { return width_; }
  cuda::DeviceBlockTableView view() const {
    return {blocks_,
            {static_cast<const int32_t*>(device_.data()),
             static_cast<int64_t>(blocks_.size())}};
  }

 private:
  std::vector<int32_t> blocks_;
  int64_t width_;
  cuda::DeviceBuffer device_;
};

// A pass's routes on the device in one block: [n] int32 source rows,
// [n] int32 entries, [n] float gates (n = rows·k), with the host copy.
class CudaRoutes final : public DeviceRoutes {
 public:
  CudaRoutes(kernels::TopKRoutes routes, cuda::DeviceBuffer device)
      : routes_(std::move(routes)), device_(std::move(device)) {}
  const kernels::TopKRoutes& routes() const override { return routes_; }
  cuda::DeviceRoutesView view() const {
    const int64_t n = static_cast<int64_t>(routes_.source_row.size());
    const auto* ints = static_cast<const int32_t*>(device_.data());
    return {&routes_,
            {ints, n},
            {ints + n, n},
            {reinterpret_cast<const float*>(ints + 2 * n), n}};
  }

 private:
  kernels::TopKRoutes routes_;
  cuda::DeviceBuffer device_;
};

const CudaMatrix& MatrixOf(const DeviceMatrix& m) {
  return static_cast<const CudaMatrix&>(m);
}

cuda::DeviceSlotRows SlotRowsOf(const DeviceSlotMap& m) {
  return static_cast<const CudaSlotMap&>(m).rows();
}

cuda::DevicePagedRows CudaPagedRowsOf(const DevicePassRows& rows) {
  cuda::DevicePagedRows out{rows.rows, rows.start, {}, {}};
  if (rows.step != nullptr) {
    const auto& map = static_cast<const CudaSlotMap&>(*rows.step);
    out.positions_host = map.positions();
    out.positions_device = map.device_positions_span();
  }
  return out;
}

class CudaExecutorDevice final : public ExecutorDevice {
 public:
  static absl::StatusOr<std::unique_ptr<ExecutorDevice>> Create(int ordinal) {
    if (ordinal < 0 || ordinal >= cuda::DeviceCount()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cuda executor: CUDA device ", ordinal, " is not available (",
          cuda::DeviceCount(), " usable device(s) visible)"));
    }
    std::unique_ptr<CudaExecutorDevice> d(new CudaExecutorDevice(ordinal));
    TWICE_ASSIGN_OR_RETURN(d->stream_, cuda::Stream::Create(ordinal));
    TWICE_ASSIGN_OR_RETURN(
        d->gemm_, cuda::GemmRunner::Create(*d->stream_, d->allocator_));
    // Slot 0 on the device: a prefill pass's one-slot view of a state
    // array (RatChunkScan) reads it.
    TWICE_ASSIGN_OR_RETURN(d->slot_zero_,
                           d->allocator_.AllocateArray<int32_t>(1));
    TWICE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        d->slot_zero_.data(), 0, sizeof(int32_t), d->stream_->get()));
    return std::unique_ptr<ExecutorDevice>(std::move(d));
  }

  ~CudaExecutorDevice() override {
    // Queued work may still read the scratch blocks.
    if (stream_ != nullptr) (void)stream_->Synchronize();
  }

  std::string name() const override { return name_; }
  DeviceTraffic traffic() const override { return traffic_; }

  absl::StatusOr<std::unique_ptr<DeviceArray>> Allocate(
      int64_t floats) override {
    if (floats < 0) return absl::InvalidArgumentError("Allocate: floats < 0");
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer,
                           allocator_.AllocateArray<float>(floats));
    auto array = std::make_unique<CudaArray>(std::move(buffer), floats);
    TWICE_RETURN_IF_ERROR(Zero(array->floats()));
    return std::unique_ptr<DeviceArray>(std::move(array));
  }
  absl::Status Zero(DeviceFloats x) override {
    if (x.size == 0) return absl::OkStatus();
    TWICE_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(x.data, 0, FloatBytes(x.size), stream_->get()));
    return absl::OkStatus();
  }
  absl::Status CopyToDevice(absl::Span<const float> host,
                            DeviceFloats device) override {
    if (static_cast<int64_t>(host.size()) != device.size) {
      return absl::InvalidArgumentError("CopyToDevice: size mismatch");
    }
    traffic_.bytes_to_device += FloatBytes(device.size);
    return cuda::CopyToDevice(host.data(), device.data, FloatBytes(device.size),
                              stream_->get());
  }
  absl::Status CopyToHost(DeviceFloats device,
                          absl::Span<float> host) override {
    if (static_cast<int64_t>(host.size()) != device.size) {
      return absl::InvalidArgumentError("CopyToHost: size mismatch");
    }
    traffic_.bytes_to_host += FloatBytes(device.size);
    return cuda::CopyToHost(device.data, host.data(), FloatBytes(device.size),
                            stream_->get());
  }
  absl::StatusOr<std::unique_ptr<DeviceSlotMap>> UploadSlotMap(
      absl::Span<const int32_t> slots,
      absl::Span<const int64_t> positions) override {
    TWICE_RETURN_IF_ERROR(CheckSlotMap(slots, positions));
    // One copy for both: positions first keeps the int64 values aligned.
    const size_t rows = slots.size();
    std::vector<char> packed(rows * (sizeof(int64_t) + sizeof(int32_t)));
    if (rows > 0) {
      std::memcpy(packed.data(), positions.data(), rows * sizeof(int64_t));
      std::memcpy(packed.data() + rows * sizeof(int64_t), slots.data(),
                  rows * sizeof(int32_t));
    }
    const int64_t bytes = static_cast<int64_t>(packed.size());
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device,
                           allocator_.Allocate(bytes));
    if (bytes > 0) {
      TWICE_RETURN_IF_ERROR(cuda::CopyToDevice(packed.data(), device.data(),
                                               bytes, stream_->get()));
    }
    traffic_.bytes_to_device += bytes;
    return std::unique_ptr<DeviceSlotMap>(
        std::make_unique<CudaSlotMap>(slots, positions, std::move(device)));
  }
  absl::StatusOr<std::unique_ptr<DeviceBlockTable>> UploadBlockTable(
      absl::Span<const int32_t> table, int64_t width) override {
    TWICE_RETURN_IF_ERROR(CheckBlockTable(table, width));
    const int64_t bytes = static_cast<int64_t>(table.size() * sizeof(int32_t));
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device,
                           allocator_.Allocate(std::max<int64_t>(bytes, 4)));
    if (bytes > 0) {
      TWICE_RETURN_IF_ERROR(cuda::CopyToDevice(table.data(), device.data(),
                                               bytes, stream_->get()));
    }
    traffic_.bytes_to_device += bytes;
    return std::unique_ptr<DeviceBlockTable>(
        std::make_unique<CudaBlockTable>(table, width, std::move(device)));
  }
  absl::StatusOr<std::unique_ptr<DeviceRoutes>> UploadRoutes(
      kernels::TopKRoutes routes) override {
    TWICE_RETURN_IF_ERROR(kernels::CheckRoutes(routes));
    // One copy for the three arrays (4-byte entries each).
    const size_t n = routes.source_row.size();
    std::vector<char> packed(3 * n * sizeof(int32_t));
    std::memcpy(packed.data(), routes.source_row.data(), n * sizeof(int32_t));
    std::memcpy(packed.data() + n * sizeof(int32_t), routes.entry.data(),
                n * sizeof(int32_t));
    std::memcpy(packed.data() + 2 * n * sizeof(int32_t), routes.gate.data(),
                n * sizeof(float));
    const int64_t bytes = static_cast<int64_t>(packed.size());
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device,
                           allocator_.Allocate(std::max<int64_t>(bytes, 4)));
    if (bytes > 0) {
      TWICE_RETURN_IF_ERROR(cuda::CopyToDevice(packed.data(), device.data(),
                                               bytes, stream_->get()));
    }
    traffic_.bytes_to_device += bytes;
    return std::unique_ptr<DeviceRoutes>(
        std::make_unique<CudaRoutes>(std::move(routes), std::move(device)));
  }
  absl::Status CopyRows(DeviceFloats src, int64_t src_stride, DeviceFloats dst,
                        int64_t dst_stride, int64_t rows,
                        int64_t cols) override {
    TWICE_RETURN_IF_ERROR(
        CheckCopyRows(src, src_stride, dst, dst_stride, rows, cols));
    if (rows == 0 || cols == 0) return absl::OkStatus();
    TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        dst.data, FloatBytes(dst_stride), src.data, FloatBytes(src_stride),
        FloatBytes(cols), static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
        stream_->get()));
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<DeviceMatrix>> UploadMatrix(
      const kernels::Tensor& weight) override {
    if (weight.rank() < 2 || weight.dim(0) < 1) {
      return absl::InvalidArgumentError(
          "UploadMatrix: a matrix needs rank >= 2 and rows");
    }
    const int64_t rows = weight.dim(0);
    const int64_t cols = weight.size() / rows;
    // Staged host bytes live in device blocks until the conversion ran.
    std::vector<cuda::DeviceBuffer> staged;
    auto stage = [&](const void* host, int64_t bytes) -> absl::StatusOr<void*> {
      TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer block,
                             allocator_.Allocate(bytes));
      TWICE_RETURN_IF_ERROR(
          cuda::CopyToDevice(host, block.data(), bytes, stream_->get()));
      staged.push_back(std::move(block));
      return staged.back().data();
    };
    TWICE_ASSIGN_OR_RETURN(
        cuda::DeviceBuffer bf16,
        cuda::UploadWeightAsBf16(*stream_, allocator_, weight, stage));
    TWICE_RETURN_IF_ERROR(stream_->Synchronize());
    traffic_.weight_bytes +=
        weight.size() * kernels::DTypeSize(weight.dtype()) +
        (weight.dtype() == kernels::DType::kI8
             ? FloatBytes(cuda::I8ScaleCountOf(weight))
             : 0);
    return std::unique_ptr<DeviceMatrix>(
        std::make_unique<CudaMatrix>(std::move(bf16), rows, cols));
  }
  absl::Status Synchronize() override { return stream_->Synchronize(); }

  absl::Status Embedding(absl::Span<const int32_t> ids,
                         const DeviceMatrix& table, float scale,
                         DeviceFloats out) override {
    traffic_.bytes_to_device +=
        static_cast<int64_t>(ids.size() * sizeof(int32_t));
    return cuda::Embedding(*stream_, allocator_, ids, MatrixOf(table).values(),
                           table.rows(), table.cols(), scale, Span(out));
  }
  absl::Status RmsNorm(DeviceFloats x, int64_t rows, int64_t dim,
                       DeviceFloats weight, float eps,
                       DeviceFloats y) override {
    return cuda::RmsNorm(*stream_, ConstSpan(x), rows, dim, ConstSpan(weight),
                         eps, Span(y));
  }
  absl::Status Linear(DeviceFloats x, int64_t rows, const DeviceMatrix& weight,
                      DeviceFloats y, const LinearEpilogue& epilogue) override {
    const int64_t k = weight.cols();
    if (x.size != rows * k || y.size != rows * weight.rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Linear: x has ", x.size, " floats and y ", y.size,
                       ", expected ", rows * k, " and ", rows * weight.rows()));
    }
    // cuBLASLt adds the bias after alpha: a scaled bias would need its
    // own pass, and no model has one.
    if (epilogue.scale != 1.0f && epilogue.bias.size > 0) {
      return absl::UnimplementedError(
          "Linear: a scale with a bias has no CUDA epilogue");
    }
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<cuda::Bf16> x16, Scratch(rows * k));
    TWICE_RETURN_IF_ERROR(cuda::ConvertToBf16(*stream_, ConstSpan(x), x16));
    return gemm_->Linear(x16, MatrixOf(weight).values(),
                         ConstSpan(epilogue.bias),
                         cuda::GemmShape{rows, weight.rows(), k},
                         epilogue.accumulate, Span(y), epilogue.scale);
  }
  absl::Status CausalConv1d(DeviceFloats x, int64_t tokens, int64_t channels,
                            int64_t x_stride, DeviceFloats weight,
                            int64_t kernel_size, DeviceFloats tail,
                            DeviceFloats out) override {
    return cuda::CausalConv1d(*stream_, ConstSpan(x), tokens, channels,
                              x_stride, ConstSpan(weight), kernel_size,
                              Span(tail), Span(out));
  }
  absl::Status BiasSiluRows(DeviceFloats x, int64_t rows,
                            DeviceFloats bias) override {
    return cuda::BiasSiluRows(*stream_, Span(x), rows, ConstSpan(bias));
  }
  absl::Status SoftplusBiasRows(DeviceFloats raw, int64_t rows, int64_t stride,
                                DeviceFloats bias, DeviceFloats out) override {
    return cuda::SoftplusBiasRows(*stream_, ConstSpan(raw), rows, stride,
                                  ConstSpan(bias), Span(out));
  }
  absl::Status GatedGroupRmsNorm(DeviceFloats z, int64_t z_stride,
                                 DeviceFloats y, int64_t rows, int64_t width,
                                 int64_t groups, DeviceFloats weight,
                                 double eps, DeviceFloats out) override {
    return cuda::GatedGroupRmsNorm(*stream_, ConstSpan(z), z_stride,
                                   ConstSpan(y), rows, width, groups,
                                   ConstSpan(weight), eps, Span(out));
  }
  absl::Status SsdChunkScan(const kernels::SsdShape& shape, int64_t tokens,
                            int64_t chunk, DeviceFloats x, int64_t x_stride,
                            DeviceFloats b, DeviceFloats c, int64_t bc_stride,
                            DeviceFloats dt, DeviceFloats a, DeviceFloats d,
                            DeviceFloats state, DeviceFloats y) override {
    return cuda::SsdChunkScan(*stream_, allocator_, shape, tokens, chunk,
                              ConstSpan(x), x_stride, ConstSpan(b),
                              ConstSpan(c), bc_stride, ConstSpan(dt),
                              ConstSpan(a), ConstSpan(d), Span(state), Span(y));
  }
  absl::Status CausalConv1dStepSlots(DeviceFloats x, int64_t channels,
                                     int64_t x_stride, DeviceFloats weight,
                                     int64_t kernel_size, DeviceFloats tails,
                                     const DeviceSlotMap& slots,
                                     DeviceFloats out) override {
    return cuda::CausalConv1dStepSlots(
        *stream_, ConstSpan(x), channels, x_stride, ConstSpan(weight),
        kernel_size, Span(tails), SlotRowsOf(slots), Span(out));
  }
  absl::Status SsdStepSlots(const kernels::SsdShape& shape, DeviceFloats x,
                            int64_t x_stride, DeviceFloats b, DeviceFloats c,
                            int64_t bc_stride, DeviceFloats dt, DeviceFloats a,
                            DeviceFloats d, DeviceFloats states,
                            const DeviceSlotMap& slots,
                            DeviceFloats y) override {
    return cuda::SsdStepSlots(*stream_, shape, ConstSpan(x), x_stride,
                              ConstSpan(b), ConstSpan(c), bc_stride,
                              ConstSpan(dt), ConstSpan(a), ConstSpan(d),
                              Span(states), SlotRowsOf(slots), Span(y));
  }
  absl::Status RopeRotateHalf(DeviceFloats x, int64_t rows, int64_t row_stride,
                              int64_t heads, int64_t head_dim,
                              int64_t start_pos, float base) override {
    return cuda::RopeRotateHalf(*stream_, Span(x), rows, row_stride, heads,
                                head_dim, start_pos, base);
  }
  absl::Status SiluMul(DeviceFloats gate, int64_t gate_stride,
                       DeviceFloats mult, int64_t mult_stride, int64_t rows,
                       int64_t cols, DeviceFloats out) override {
    return cuda::SiluMul(*stream_, ConstSpan(gate), gate_stride,
                         ConstSpan(mult), mult_stride, rows, cols, Span(out));
  }
  absl::Status ReluSquared(DeviceFloats x) override {
    return cuda::ReluSquared(*stream_, Span(x));
  }
  absl::Status Gelu(DeviceFloats x) override {
    return cuda::Gelu(*stream_, ConstSpan(x), Span(x));
  }
  absl::Status RatChunkScan(DeviceFloats proj, int64_t proj_stride,
                            DeviceFloats gate_bias, const DevicePassRows& rows,
                            int32_t prefill_slot,
                            const kernels::RatPagedDims& dims,
                            const DeviceBlockTable& table, DeviceFloats open,
                            DeviceFloats closed, DeviceFloats q_out,
                            DeviceFloats k_out, DeviceFloats v_out,
                            DeviceFloats z_out) override {
    cuda::DeviceSlotRows slots;
    DeviceFloats states = open;
    static constexpr int32_t kSlotZero[] = {0};
    if (rows.step != nullptr) {
      slots = SlotRowsOf(*rows.step);
    } else {
      // The pass's one sequence: its slot's [2, D] as a one-slot array.
      const int64_t per_slot = 2 * dims.dim;
      if (prefill_slot < 0 || (prefill_slot + 1) * per_slot > open.size) {
        return absl::InvalidArgumentError(
            absl::StrCat("RatChunkScan: slot ", prefill_slot,
                         " is outside the open-state array"));
      }
      states = open.sub(prefill_slot * per_slot, per_slot);
      slots = {kSlotZero, {static_cast<const int32_t*>(slot_zero_.data()), 1}};
    }
    return cuda::RatChunkScan(
        *stream_, ConstSpan(proj), proj_stride, ConstSpan(gate_bias),
        CudaPagedRowsOf(rows), slots, WithTableWidth(dims, table),
        static_cast<const CudaBlockTable&>(table).view(), Span(states),
        Span(closed), Span(q_out), Span(k_out), Span(v_out), Span(z_out));
  }
  absl::Status GatherRows(DeviceFloats src, int64_t cols,
                          const DeviceRoutes& routes,
                          DeviceFloats dst) override {
    return cuda::GatherRows(*stream_, ConstSpan(src), cols,
                            static_cast<const CudaRoutes&>(routes).view(),
                            Span(dst));
  }
  absl::Status CombineRoutedRows(DeviceFloats base, DeviceFloats routed,
                                 int64_t cols, const DeviceRoutes& routes,
                                 float scale, DeviceFloats x) override {
    return cuda::CombineRoutedRows(
        *stream_, ConstSpan(base), ConstSpan(routed), cols,
        static_cast<const CudaRoutes&>(routes).view(), scale, Span(x));
  }
  absl::Status RatPagedAttention(DeviceFloats q, DeviceFloats own_k,
                                 DeviceFloats own_v, DeviceFloats z,
                                 const DevicePassRows& rows,
                                 const kernels::RatPagedDims& dims,
                                 const DeviceBlockTable& table,
                                 DeviceFloats closed, float scale,
                                 DeviceFloats out) override {
    return cuda::RatPagedAttention(
        *stream_, ConstSpan(q), ConstSpan(own_k), ConstSpan(own_v),
        ConstSpan(z), CudaPagedRowsOf(rows), WithTableWidth(dims, table),
        static_cast<const CudaBlockTable&>(table).view(), ConstSpan(closed),
        scale, Span(out));
  }
  absl::Status SwiGlu(DeviceFloats u, int64_t rows, int64_t hidden,
                      DeviceFloats out) override {
    return cuda::SwiGlu(*stream_, ConstSpan(u), rows, hidden, Span(out));
  }
  // The published shape (F = 16, hd = 64) runs the fused chunk-parallel
  // bf16 kernel (with JRT-RNN's encoder pass when E > 0) on bf16 copies of
  // the inputs; other shapes the feature maps into scratch, then the
  // recurrent featurized form.
  absl::Status LinearAttention(DeviceFloats q, DeviceFloats k, DeviceFloats v,
                               int64_t tokens, DeviceFloats k_enc,
                               DeviceFloats v_enc, int64_t encoder_tokens,
                               const kernels::TaylorAttentionDims& dims,
                               float eps, DeviceFloats kv, DeviceFloats k_sum,
                               DeviceFloats y) override {
    const int64_t f = dims.feature_dim;
    const int64_t fs = 1 + f + f * f;
    const int64_t rows = tokens * dims.heads;
    const int64_t enc_rows = encoder_tokens * dims.heads;
    if (tokens < 1 || f < 1 || encoder_tokens < 0 || q.size != rows * f ||
        k.size != rows * f || v.size != rows * dims.head_dim ||
        y.size != v.size || k_enc.size != enc_rows * f ||
        v_enc.size != enc_rows * dims.head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LinearAttention: q and k need ", rows * f, " floats, v and y ",
          rows * dims.head_dim, ", k_enc ", enc_rows * f, ", v_enc ",
          enc_rows * dims.head_dim, "; got ", q.size, ", ", k.size, ", ",
          v.size, ", ", y.size, ", ", k_enc.size, " and ", v_enc.size));
    }
    if (f == 16 && dims.head_dim == 64) {
      // bf16 copies of the inputs, one scratch block: q | k | v | y | k_enc
      // | v_enc.
      TWICE_ASSIGN_OR_RETURN(
          cuda::DeviceSpan<cuda::Bf16> block,
          Scratch(2 * q.size + 2 * v.size + k_enc.size + v_enc.size));
      int64_t used = 0;
      auto carve = [&](int64_t count) {
        const cuda::DeviceSpan<cuda::Bf16> part{block.data + used, count};
        used += count;
        return part;
      };
      const cuda::DeviceSpan<cuda::Bf16> q16 = carve(q.size),
                                         k16 = carve(k.size),
                                         v16 = carve(v.size),
                                         y16 = carve(y.size),
                                         ke16 = carve(k_enc.size),
                                         ve16 = carve(v_enc.size);
      auto convert = [&](DeviceFloats from, cuda::DeviceSpan<cuda::Bf16> to) {
        return from.size == 0
                   ? absl::OkStatus()
                   : cuda::ConvertToBf16(*stream_, ConstSpan(from), to);
      };
      TWICE_RETURN_IF_ERROR(convert(q, q16));
      TWICE_RETURN_IF_ERROR(convert(k, k16));
      TWICE_RETURN_IF_ERROR(convert(v, v16));
      TWICE_RETURN_IF_ERROR(convert(k_enc, ke16));
      TWICE_RETURN_IF_ERROR(convert(v_enc, ve16));
      TWICE_RETURN_IF_ERROR(cuda::PrefixLinearAttentionPrefillBf16(
          *stream_, q16, k16, v16, tokens, ke16, ve16, encoder_tokens,
          cuda::FusedLinearAttentionDims{1, dims.heads, dims.head_dim, f}, eps,
          Span(kv), Span(k_sum), y16));
      return cuda::ConvertToF32(*stream_, y16, Span(y));
    }
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<float> phi,
                           F32Scratch((2 * rows + enc_rows) * fs));
    const cuda::DeviceSpan<float> phi_q{phi.data, rows * fs};
    const cuda::DeviceSpan<float> phi_k{phi.data + rows * fs, rows * fs};
    const cuda::DeviceSpan<float> phi_k_enc{phi.data + 2 * rows * fs,
                                            enc_rows * fs};
    TWICE_RETURN_IF_ERROR(
        cuda::TaylorFeatureMap(*stream_, ConstSpan(q), rows, f, phi_q));
    TWICE_RETURN_IF_ERROR(
        cuda::TaylorFeatureMap(*stream_, ConstSpan(k), rows, f, phi_k));
    if (enc_rows > 0) {
      TWICE_RETURN_IF_ERROR(cuda::TaylorFeatureMap(*stream_, ConstSpan(k_enc),
                                                   enc_rows, f, phi_k_enc));
    }
    return cuda::FeaturizedLinearAttention(
        *stream_, phi_q, phi_k, ConstSpan(v), tokens, phi_k_enc,
        ConstSpan(v_enc), encoder_tokens,
        kernels::LinearAttentionDims{dims.heads, dims.head_dim, fs}, eps,
        Span(kv), Span(k_sum), Span(y));
  }

  absl::Status RopeRotateHalfAt(DeviceFloats x, int64_t row_stride,
                                int64_t heads, int64_t head_dim,
                                const DeviceSlotMap& step,
                                float base) override {
    const auto& map = static_cast<const CudaSlotMap&>(step);
    return cuda::RopeRotateHalfAt(*stream_, Span(x),
                                  static_cast<int64_t>(map.positions().size()),
                                  row_stride, heads, head_dim, map.positions(),
                                  map.device_positions_span(), base);
  }
  absl::Status PagedKvWrite(DeviceFloats k, int64_t k_stride, DeviceFloats v,
                            int64_t v_stride, const DevicePassRows& rows,
                            const kernels::PagedKvDims& dims,
                            const DeviceBlockTable& table, DeviceFloats k_pool,
                            DeviceFloats v_pool) override {
    return cuda::PagedKvWrite(*stream_, ConstSpan(k), k_stride, ConstSpan(v),
                              v_stride, CudaPagedRowsOf(rows),
                              WithTableWidth(dims, table),
                              static_cast<const CudaBlockTable&>(table).view(),
                              Span(k_pool), Span(v_pool));
  }
  absl::Status PagedAttention(DeviceFloats q, int64_t q_stride,
                              const DevicePassRows& rows,
                              const kernels::PagedKvDims& dims,
                              const DeviceBlockTable& table,
                              DeviceFloats k_pool, DeviceFloats v_pool,
                              float scale, DeviceFloats y) override {
    return cuda::PagedCausalAttention(
        *stream_, ConstSpan(q), q_stride, CudaPagedRowsOf(rows),
        WithTableWidth(dims, table),
        static_cast<const CudaBlockTable&>(table).view(), ConstSpan(k_pool),
        ConstSpan(v_pool), scale, Span(y));
  }

  absl::Status WindowAttention(DeviceFloats q, int64_t q_stride, DeviceFloats k,
                               DeviceFloats v,
                               const kernels::WindowAttentionDims& dims,
                               float scale, DeviceFloats out) override {
    return cuda::WindowAttention(*stream_, ConstSpan(q), q_stride, ConstSpan(k),
                                 ConstSpan(v), dims, scale, Span(out));
  }
  absl::Status LinearAttentionStepSlots(
      DeviceFloats q, DeviceFloats k, DeviceFloats v,
      const kernels::TaylorAttentionDims& dims, float eps,
      DeviceFloats kv_states, DeviceFloats k_states, const DeviceSlotMap& slots,
      DeviceFloats y) override {
    return cuda::LinearAttentionStepSlots(
        *stream_, ConstSpan(q), ConstSpan(k), ConstSpan(v), dims, eps,
        Span(kv_states), Span(k_states), SlotRowsOf(slots), Span(y));
  }
  absl::Status WindowAttentionStepSlots(
      DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
      float rotary_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
      const DeviceSlotMap& slots, DeviceFloats y) override {
    const auto& map = static_cast<const CudaSlotMap&>(slots);
    return cuda::WindowAttentionStepSlots(
        *stream_, ConstSpan(qkv), qkv_stride, dims, rotary_base, scale,
        map.device_positions_span(), map.positions(), Span(ring_k),
        Span(ring_v), map.rows(), Span(y));
  }
  absl::Status SampleRows(DeviceFloats logits, int64_t rows, int64_t row_stride,
                          int64_t vocab,
                          absl::Span<const kernels::SamplingRule> rules,
                          absl::Span<int32_t> ids) override {
    if (static_cast<int64_t>(ids.size()) != rows) {
      return absl::InvalidArgumentError("SampleRows: one id per row");
    }
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer out,
                           allocator_.AllocateArray<int32_t>(rows));
    TWICE_RETURN_IF_ERROR(cuda::SampleRows(*stream_, allocator_,
                                           ConstSpan(logits), rows, row_stride,
                                           vocab, rules, out.span<int32_t>()));
    const int64_t bytes = rows * static_cast<int64_t>(sizeof(int32_t));
    traffic_.bytes_to_device +=
        static_cast<int64_t>(rules.size() * sizeof(kernels::SamplingRule));
    traffic_.bytes_to_host += bytes;
    return cuda::CopyToHost(out.data(), ids.data(), bytes, stream_->get());
  }

 private:
  explicit CudaExecutorDevice(int ordinal)
      : name_(absl::StrCat("cuda:", ordinal, " (", cuda::DeviceName(ordinal),
                           ")")),
        allocator_(ordinal) {}

  // A bf16 block of at least `count` elements, kept between calls (work on
  // the one stream is ordered, so reuse is safe).
  absl::StatusOr<cuda::DeviceSpan<cuda::Bf16>> Scratch(int64_t count) {
    if (scratch_.bytes() < count * 2) {
      TWICE_ASSIGN_OR_RETURN(scratch_,
                             allocator_.AllocateArray<cuda::Bf16>(count));
    }
    return cuda::DeviceSpan<cuda::Bf16>{
        static_cast<cuda::Bf16*>(scratch_.data()), count};
  }

  // The same for f32 (the linear attention's feature maps).
  absl::StatusOr<cuda::DeviceSpan<float>> F32Scratch(int64_t count) {
    if (f32_scratch_.bytes() < FloatBytes(count)) {
      TWICE_ASSIGN_OR_RETURN(f32_scratch_,
                             allocator_.AllocateArray<float>(count));
    }
    return cuda::DeviceSpan<float>{static_cast<float*>(f32_scratch_.data()),
                                   count};
  }

  const std::string name_;
  // Declaration order is destruction order reversed: the runner and the
  // blocks go before the stream and the allocator they use.
  cuda::DeviceAllocator allocator_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::GemmRunner> gemm_;
  cuda::DeviceBuffer scratch_;
  cuda::DeviceBuffer f32_scratch_;
  cuda::DeviceBuffer slot_zero_;  // one int32 0
  DeviceTraffic traffic_;
};

}  // namespace
#endif  // TWICE_HAVE_CUDA

absl::StatusOr<std::unique_ptr<ExecutorDevice>> NewCudaExecutorDevice(
    int ordinal) {
#if TWICE_HAVE_CUDA
  return CudaExecutorDevice::Create(ordinal);
#else
  (void)ordinal;
  return absl::FailedPreconditionError(
      "cuda executor: this build of Twice has no CUDA kernels (configured "
      "with TWICE_WITH_CUDA=OFF or without nvcc); use the cpu device");
#endif
}

}  // namespace twice::engine
