#include "kernels/cuda/weight_upload.h"

#include "kernels/cuda/cuda_ops.h"
#include "kernels/dtype.h"
#include "kernels/i8_layout.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {

int64_t I8ScaleCountOf(const Tensor& t) {
  const int64_t rows = t.dim(0);
  return rows * I8BlocksPerRow(rows == 0 ? 0 : t.size() / rows);
}

absl::StatusOr<DeviceBuffer> UploadWeightAsBf16(const Stream& stream,
                                                DeviceAllocator& allocator,
                                                const Tensor& host,
                                                StageFn stage) {
  const int64_t count = host.size();
  const int64_t stored_bytes = count * DTypeSize(host.dtype());
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer out,
                         allocator.AllocateArray<Bf16>(count));
  const DeviceSpan<Bf16> bf16 = out.span<Bf16>();
  switch (host.dtype()) {
    case DType::kBF16:
      TWICE_RETURN_IF_ERROR(CopyToDevice(host.raw_data(), out.data(),
                                         stored_bytes, stream.get()));
      break;
    case DType::kF32: {
      TWICE_ASSIGN_OR_RETURN(void* staged,
                             stage(host.raw_data(), stored_bytes));
      TWICE_RETURN_IF_ERROR(ConvertToBf16(
          stream, {static_cast<const float*>(staged), count}, bf16));
      break;
    }
    case DType::kF16: {
      TWICE_ASSIGN_OR_RETURN(void* staged,
                             stage(host.raw_data(), stored_bytes));
      TWICE_RETURN_IF_ERROR(ConvertF16ToBf16(
          stream, {static_cast<const uint16_t*>(staged), count}, bf16));
      break;
    }
    case DType::kI8: {
      const int64_t rows = host.dim(0);
      const int64_t cols = rows == 0 ? 0 : count / rows;
      const int64_t scale_count = I8ScaleCountOf(host);
      // The device kernel takes rows; the host keeps I8 in row groups
      // (kernels/i8_layout.h).
      const I8Arrays row_major =
          UnpackI8Rows(static_cast<const int8_t*>(host.raw_data()),
                       host.scales(), rows, cols);
      TWICE_ASSIGN_OR_RETURN(void* values,
                             stage(row_major.values.data(), stored_bytes));
      TWICE_ASSIGN_OR_RETURN(
          void* scales,
          stage(row_major.scales.data(),
                scale_count * static_cast<int64_t>(sizeof(float))));
      TWICE_RETURN_IF_ERROR(DequantizeRowsToBf16(
          stream, {static_cast<const int8_t*>(values), count},
          {static_cast<const float*>(scales), scale_count}, rows, cols, bf16));
      // row_major is freed on return: the copies must have read it.
      TWICE_RETURN_IF_ERROR(stream.Synchronize());
      break;
    }
  }
  return out;
}

}  // namespace twice::kernels::cuda
