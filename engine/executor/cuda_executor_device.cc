// The CUDA executor device's memory, uploads, GEMMs and sampling
// (cuda_executor_device.h), and NewCudaExecutorDevice.
#include "engine/executor/executor_device.h"

#if TWICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/executor/cuda_executor_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/paged_splits.h"
#include "kernels/cuda/weight_upload.h"
#include "kernels/status_macros.h"

namespace twice::engine::cuda_executor {

absl::StatusOr<std::unique_ptr<ExecutorDevice>> CudaExecutorDevice::Create(
    int ordinal) {
  if (ordinal < 0 || ordinal >= cuda::DeviceCount()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda executor: CUDA device ", ordinal, " is not available (",
        cuda::DeviceCount(), " usable device(s) visible)"));
  }
  std::unique_ptr<CudaExecutorDevice> d(new CudaExecutorDevice(ordinal));
  TWICE_ASSIGN_OR_RETURN(d->stream_, cuda::Stream::Create(ordinal));
  TWICE_ASSIGN_OR_RETURN(d->gemm_,
                         cuda::GemmRunner::Create(*d->stream_, d->allocator_));
  // Slot 0 on the device: a prefill pass's one-slot view of a state
  // array (RatChunkScan) reads it.
  TWICE_ASSIGN_OR_RETURN(d->slot_zero_,
                         d->allocator_.AllocateArray<int32_t>(1));
  TWICE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      d->slot_zero_.data(), 0, sizeof(int32_t), d->stream_->get()));
  TWICE_ASSIGN_OR_RETURN(d->downloads_, cuda::HostDownloads::Create(ordinal));
  d->fused_linear_attention_fits_ = cuda::FusedLinearAttentionFits(ordinal);
  d->split_warps_ = int64_t{cuda::MultiprocessorCount(ordinal)} *
                    cuda::kSplitWarpsPerMultiprocessor;
  return std::unique_ptr<ExecutorDevice>(std::move(d));
}

CudaExecutorDevice::~CudaExecutorDevice() {
  // Queued work may still read the scratch blocks.
  if (stream_ != nullptr) (void)stream_->Synchronize();
}

absl::StatusOr<std::unique_ptr<DeviceArray>> CudaExecutorDevice::Allocate(
    int64_t floats) {
  if (floats < 0) return absl::InvalidArgumentError("Allocate: floats < 0");
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer buffer,
                         allocator_.AllocateArray<float>(floats));
  auto array = std::make_unique<CudaArray>(std::move(buffer), floats);
  TWICE_RETURN_IF_ERROR(Zero(array->floats()));
  return std::unique_ptr<DeviceArray>(std::move(array));
}

absl::Status CudaExecutorDevice::Zero(DeviceFloats x) {
  if (x.size == 0) return absl::OkStatus();
  TWICE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(x.data, 0, FloatBytes(x.size), stream_->get()));
  return absl::OkStatus();
}

absl::Status CudaExecutorDevice::CopyToDevice(absl::Span<const float> host,
                                              DeviceFloats device) {
  if (static_cast<int64_t>(host.size()) != device.size) {
    return absl::InvalidArgumentError("CopyToDevice: size mismatch");
  }
  traffic_.bytes_to_device += FloatBytes(device.size);
  return stream_->Upload(host.data(), device.data, FloatBytes(device.size));
}

absl::Status CudaExecutorDevice::CopyAllToHost(
    absl::Span<const HostCopy> copies) {
  TWICE_RETURN_IF_ERROR(CheckHostCopies(copies));
  std::vector<cuda::HostDownloads::Copy> raw;
  raw.reserve(copies.size());
  for (const HostCopy& c : copies) {
    raw.push_back({c.from.data, c.to.data(), FloatBytes(c.from.size)});
    traffic_.bytes_to_host += FloatBytes(c.from.size);
  }
  const HostWaitTimer wait(traffic_);
  return downloads_->CopyAll(*stream_, raw);
}

absl::StatusOr<std::unique_ptr<DeviceSlotMap>>
CudaExecutorDevice::UploadSlotMap(absl::Span<const int32_t> slots,
                                  absl::Span<const int64_t> positions) {
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
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device, allocator_.Allocate(bytes));
  if (bytes > 0) {
    TWICE_RETURN_IF_ERROR(stream_->Upload(packed.data(), device.data(), bytes));
  }
  traffic_.bytes_to_device += bytes;
  return std::unique_ptr<DeviceSlotMap>(
      std::make_unique<CudaSlotMap>(slots, positions, std::move(device)));
}

absl::StatusOr<std::unique_ptr<DeviceBlockTable>>
CudaExecutorDevice::UploadBlockTable(absl::Span<const int32_t> table,
                                     int64_t width) {
  TWICE_RETURN_IF_ERROR(CheckBlockTable(table, width));
  const int64_t bytes = static_cast<int64_t>(table.size() * sizeof(int32_t));
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device,
                         allocator_.Allocate(std::max<int64_t>(bytes, 4)));
  if (bytes > 0) {
    TWICE_RETURN_IF_ERROR(stream_->Upload(table.data(), device.data(), bytes));
  }
  traffic_.bytes_to_device += bytes;
  return std::unique_ptr<DeviceBlockTable>(
      std::make_unique<CudaBlockTable>(table, width, std::move(device)));
}

absl::Status CudaExecutorDevice::FillBlockTable(DeviceBlockTable& table,
                                                absl::Span<const int32_t> rows,
                                                int64_t width) {
  TWICE_ASSIGN_OR_RETURN(std::vector<int32_t> padded,
                         PaddedTableRows(table, rows, width));
  auto& t = static_cast<CudaBlockTable&>(table);
  const int64_t bytes = static_cast<int64_t>(padded.size() * sizeof(int32_t));
  if (bytes > 0) {
    // Queued behind the work that read the old rows (one stream).
    TWICE_RETURN_IF_ERROR(
        stream_->Upload(padded.data(), t.device_data(), bytes));
  }
  traffic_.bytes_to_device += bytes;
  t.set_blocks(std::move(padded));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceMatrixTable>>
CudaExecutorDevice::UploadMatrixTable(
    absl::Span<const DeviceMatrix* const> matrices) {
  TWICE_RETURN_IF_ERROR(CheckMatrixTable(matrices));
  std::vector<const cuda::Bf16*> pointers;
  for (const DeviceMatrix* m : matrices) {
    pointers.push_back(static_cast<const CudaMatrix&>(*m).values().data);
  }
  const int64_t bytes =
      static_cast<int64_t>(pointers.size() * sizeof(pointers[0]));
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device, allocator_.Allocate(bytes));
  TWICE_RETURN_IF_ERROR(stream_->Upload(pointers.data(), device.data(), bytes));
  traffic_.bytes_to_device += bytes;
  return std::unique_ptr<DeviceMatrixTable>(std::make_unique<CudaMatrixTable>(
      static_cast<int64_t>(matrices.size()), matrices[0]->rows(),
      matrices[0]->cols(), std::move(device)));
}

absl::StatusOr<std::unique_ptr<DeviceRoutes>> CudaExecutorDevice::UploadRoutes(
    kernels::TopKRoutes routes) {
  TWICE_RETURN_IF_ERROR(kernels::CheckRoutes(routes));
  // One copy for the three arrays (4-byte entries each).
  const size_t n = routes.source_row.size();
  std::vector<char> packed(3 * n * sizeof(int32_t));
  if (n > 0) {  // memcpy from an empty vector's null data is undefined
    std::memcpy(packed.data(), routes.source_row.data(), n * sizeof(int32_t));
    std::memcpy(packed.data() + n * sizeof(int32_t), routes.entry.data(),
                n * sizeof(int32_t));
    std::memcpy(packed.data() + 2 * n * sizeof(int32_t), routes.gate.data(),
                n * sizeof(float));
  }
  const int64_t bytes = static_cast<int64_t>(packed.size());
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device,
                         allocator_.Allocate(std::max<int64_t>(bytes, 4)));
  if (bytes > 0) {
    TWICE_RETURN_IF_ERROR(stream_->Upload(packed.data(), device.data(), bytes));
  }
  traffic_.bytes_to_device += bytes;
  return std::unique_ptr<DeviceRoutes>(
      std::make_unique<CudaRoutes>(std::move(routes), std::move(device)));
}

absl::Status CudaExecutorDevice::CopyRows(DeviceFloats src, int64_t src_stride,
                                          DeviceFloats dst, int64_t dst_stride,
                                          int64_t rows, int64_t cols) {
  TWICE_RETURN_IF_ERROR(
      CheckCopyRows(src, src_stride, dst, dst_stride, rows, cols));
  if (rows == 0 || cols == 0) return absl::OkStatus();
  TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
      dst.data, FloatBytes(dst_stride), src.data, FloatBytes(src_stride),
      FloatBytes(cols), static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
      stream_->get()));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceMatrix>> CudaExecutorDevice::UploadMatrix(
    const kernels::Tensor& weight) {
  if (weight.rank() < 2 || weight.dim(0) < 1) {
    return absl::InvalidArgumentError(
        "UploadMatrix: a matrix needs rank >= 2 and rows");
  }
  const int64_t rows = weight.dim(0);
  const int64_t cols = weight.size() / rows;
  // Rows are padded below; the inner dimension cannot be without changing
  // every activation's layout, and no published model needs it.
  if (cols % CudaMatrix::kRowMultiple != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "UploadMatrix: cuBLASLt's bf16 GEMMs need a matrix's columns to be a "
        "multiple of 8; this one is [",
        rows, ", ", cols, "]"));
  }
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
  if (const int64_t padded = CudaMatrix::PaddedRows(rows); padded != rows) {
    // Zero rows up to a multiple of 8 (CudaMatrix).
    TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer wide,
                           allocator_.AllocateArray<cuda::Bf16>(padded * cols));
    const size_t bytes = static_cast<size_t>(rows * cols) * 2;
    TWICE_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(wide.data(), 0, static_cast<size_t>(padded * cols) * 2,
                        stream_->get()));
    TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(wide.data(), bf16.data(), bytes,
                                               cudaMemcpyDeviceToDevice,
                                               stream_->get()));
    bf16 = std::move(wide);
  }
  // No wait: the staged and unpadded blocks go back to the allocator's
  // cache, and whatever reuses them is queued on this stream behind the
  // work that reads them, so one matrix's conversion overlaps the next
  // one's staging; the executor's load ends with one Synchronize, which
  // reports any fault of the queued work.
  traffic_.weight_bytes += weight.size() * kernels::DTypeSize(weight.dtype()) +
                           (weight.dtype() == kernels::DType::kI8
                                ? FloatBytes(cuda::I8ScaleCountOf(weight))
                                : 0);
  return std::unique_ptr<DeviceMatrix>(
      std::make_unique<CudaMatrix>(std::move(bf16), rows, cols));
}

absl::Status CudaExecutorDevice::Embedding(absl::Span<const int32_t> ids,
                                           const DeviceMatrix& table,
                                           float scale, DeviceFloats out) {
  traffic_.bytes_to_device +=
      static_cast<int64_t>(ids.size() * sizeof(int32_t));
  return cuda::Embedding(*stream_, allocator_, ids, MatrixOf(table).values(),
                         table.rows(), table.cols(), scale, Span(out));
}

absl::Status CudaExecutorDevice::RmsNorm(DeviceFloats x, int64_t rows,
                                         int64_t dim, DeviceFloats weight,
                                         float eps, DeviceFloats y) {
  return cuda::RmsNorm(*stream_, ConstSpan(x), rows, dim, ConstSpan(weight),
                       eps, Span(y));
}

absl::Status CudaExecutorDevice::Linear(DeviceFloats x, int64_t rows,
                                        const DeviceMatrix& weight,
                                        DeviceFloats y,
                                        const LinearEpilogue& epilogue) {
  const LinearOutput one[] = {{&weight, y, epilogue}};
  return Linears(x, rows, one);
}

absl::StatusOr<int64_t> CudaExecutorDevice::CheckLinears(
    int64_t x_size, int64_t rows, absl::Span<const LinearOutput> outputs) {
  const int64_t k =
      outputs.front().weight != nullptr ? outputs.front().weight->cols() : 0;
  for (const LinearOutput& o : outputs) {
    if (o.weight == nullptr || o.weight->cols() != k || x_size != rows * k ||
        o.y.size != rows * o.weight->rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Linear: x has ", x_size, " floats and y ", o.y.size,
                       "; every weight needs the columns of x (", rows,
                       " rows of ", k, ") and y its rows"));
    }
    // cuBLASLt adds the bias after alpha: a scaled bias would need its
    // own pass, and no model has one.
    if (o.epilogue.scale != 1.0f && o.epilogue.bias.size > 0) {
      return absl::UnimplementedError(
          "Linear: a scale with a bias has no CUDA epilogue");
    }
  }
  return k;
}

absl::Status CudaExecutorDevice::Linears(
    DeviceFloats x, int64_t rows, absl::Span<const LinearOutput> outputs) {
  if (outputs.empty()) return absl::OkStatus();
  TWICE_ASSIGN_OR_RETURN(const int64_t k, CheckLinears(x.size, rows, outputs));
  // x in bf16 once for every product.
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<cuda::Bf16> x16, Scratch(rows * k));
  TWICE_RETURN_IF_ERROR(cuda::ConvertToBf16(*stream_, ConstSpan(x), x16));
  for (const LinearOutput& o : outputs) {
    TWICE_RETURN_IF_ERROR(
        Gemm(x16, rows, MatrixOf(*o.weight), o.y, o.epilogue));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutorDevice::ActivationLinear(
    const MlpActivation& act, DeviceFloats a, const DeviceMatrix& weight,
    DeviceFloats y, const LinearEpilogue& epilogue) {
  const LinearOutput one[] = {{&weight, y, epilogue}};
  // `a` is checked as the product's input would be, though only its bf16
  // form is written.
  TWICE_ASSIGN_OR_RETURN(const int64_t k, CheckLinears(a.size, act.rows, one));
  if (act.cols != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("ActivationLinear: the activation has ", act.cols,
                     " columns and the weight ", k));
  }
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<cuda::Bf16> a16,
                         Scratch(act.rows * k));
  TWICE_RETURN_IF_ERROR(cuda::ActivationToBf16(
      *stream_, act.kind, ConstSpan(act.in), act.in_stride, ConstSpan(act.mult),
      act.mult_stride, act.rows, act.cols, a16));
  if (act.rows == 0) return absl::OkStatus();
  return Gemm(a16, act.rows, MatrixOf(weight), y, epilogue);
}

absl::Status CudaExecutorDevice::RmsNormLinears(
    DeviceFloats x, int64_t rows, int64_t dim, DeviceFloats weight, float eps,
    DeviceFloats y, absl::Span<const LinearOutput> outputs) {
  if (outputs.empty()) return RmsNorm(x, rows, dim, weight, eps, y);
  // y is the products' input (the norm checks it is [rows, dim]).
  TWICE_ASSIGN_OR_RETURN(const int64_t k, CheckLinears(y.size, rows, outputs));
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<cuda::Bf16> y16, Scratch(rows * k));
  TWICE_RETURN_IF_ERROR(cuda::RmsNorm(*stream_, ConstSpan(x), rows, dim,
                                      ConstSpan(weight), eps, Span(y), y16));
  for (const LinearOutput& o : outputs) {
    TWICE_RETURN_IF_ERROR(
        Gemm(y16, rows, MatrixOf(*o.weight), o.y, o.epilogue));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutorDevice::Gemm(cuda::DeviceSpan<const cuda::Bf16> x16,
                                      int64_t rows, const CudaMatrix& w,
                                      DeviceFloats y,
                                      const LinearEpilogue& epilogue) {
  const int64_t k = w.cols();
  const int64_t n = w.rows(), wide_n = w.padded_rows();
  // cuBLASLt reads and writes 16-byte aligned matrices; a y or bias at an
  // odd offset into a scratch block (a MoE layer's outputs after B x E
  // router logits, E no multiple of 4) goes through the block below.
  const auto aligned = [](const float* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  if (wide_n == n && aligned(y.data) &&
      (epilogue.bias.size == 0 || aligned(epilogue.bias.data))) {
    return gemm_->Linear(x16, w.padded_values(), ConstSpan(epilogue.bias),
                         cuda::GemmShape{rows, n, k}, epilogue.accumulate,
                         Span(y), epilogue.scale);
  }
  // A row count cuBLASLt cannot take, or a misaligned y or bias: the
  // product of the zero-padded matrix lands in a [rows, wide_n] block
  // (after it, the bias padded with zeros), and its first n columns are
  // y's. Accumulation starts from a copy of y there.
  const int64_t has_bias = epilogue.bias.size > 0 ? 1 : 0;
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<float> block,
                         WideOutput(rows * wide_n + has_bias * wide_n));
  const cuda::DeviceSpan<float> wide{block.data, rows * wide_n};
  cuda::DeviceSpan<const float> bias;
  if (has_bias != 0) {
    if (epilogue.bias.size != n) {
      return absl::InvalidArgumentError(absl::StrCat("Linear: the bias has ",
                                                     epilogue.bias.size,
                                                     " floats, expected ", n));
    }
    float* padded_bias = block.data + rows * wide_n;
    TWICE_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(padded_bias, 0, FloatBytes(wide_n), stream_->get()));
    TWICE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(padded_bias, epilogue.bias.data, FloatBytes(n),
                        cudaMemcpyDeviceToDevice, stream_->get()));
    bias = {padded_bias, wide_n};
  }
  if (rows == 0) return absl::OkStatus();
  if (epilogue.accumulate) {
    TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        wide.data, FloatBytes(wide_n), y.data, FloatBytes(n), FloatBytes(n),
        static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream_->get()));
  }
  TWICE_RETURN_IF_ERROR(gemm_->Linear(
      x16, w.padded_values(), bias, cuda::GemmShape{rows, wide_n, k},
      epilogue.accumulate, wide, epilogue.scale));
  TWICE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
      y.data, FloatBytes(n), wide.data, FloatBytes(wide_n), FloatBytes(n),
      static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream_->get()));
  return absl::OkStatus();
}

CudaExecutorDevice::CudaExecutorDevice(int ordinal)
    : name_(
          absl::StrCat("cuda:", ordinal, " (", cuda::DeviceName(ordinal), ")")),
      ordinal_(ordinal),
      allocator_(ordinal) {}

absl::Status CudaExecutorDevice::MakeCurrent() {
  TWICE_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  return absl::OkStatus();
}

absl::StatusOr<cuda::DeviceSpan<cuda::Bf16>> CudaExecutorDevice::Scratch(
    int64_t count) {
  return Kept<cuda::Bf16>(scratch_, count);
}

absl::StatusOr<cuda::DeviceSpan<float>> CudaExecutorDevice::WideOutput(
    int64_t count) {
  return Kept<float>(wide_output_, count);
}

absl::StatusOr<cuda::DeviceSpan<float>> CudaExecutorDevice::F32Scratch(
    int64_t count) {
  return Kept<float>(f32_scratch_, count);
}

}  // namespace twice::engine::cuda_executor
#endif  // TWICE_HAVE_CUDA

namespace twice::engine {

absl::StatusOr<std::unique_ptr<ExecutorDevice>> NewCudaExecutorDevice(
    int ordinal) {
#if TWICE_HAVE_CUDA
  return cuda_executor::CudaExecutorDevice::Create(ordinal);
#else
  (void)ordinal;
  return absl::FailedPreconditionError(
      "cuda executor: this build of Twice has no CUDA kernels (configured "
      "with TWICE_WITH_CUDA=OFF or without nvcc); use the cpu device");
#endif
}

}  // namespace twice::engine
