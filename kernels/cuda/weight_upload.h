// A weight of any dtype (kernels/tensor.h: f32, bf16, f16, int8 in row
// groups) as the bf16 [rows, cols] the cuBLASLt GEMMs read, in one device
// block. bf16 is copied as is; f32 and f16 are staged as stored and
// converted on the device; int8 is unpacked to rows with their scales and
// dequantized on the device. Nothing is widened on the host.
//
// `stage(host, bytes)` returns device memory holding a copy of `bytes` host
// bytes, valid until the stream has run the work queued after it (the
// kernel backend's call buffers, filled through the lane stream's
// page-locked ring; a plain device block elsewhere).
// Returns after queueing; int8 synchronises once (its unpacked rows live on
// the host only for this call).
#ifndef TWICE_KERNELS_CUDA_WEIGHT_UPLOAD_H_
#define TWICE_KERNELS_CUDA_WEIGHT_UPLOAD_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/stream.h"
#include "kernels/tensor.h"

namespace twice::kernels::cuda {

using StageFn = absl::FunctionRef<absl::StatusOr<void*>(const void*, int64_t)>;

[[nodiscard]] absl::StatusOr<DeviceBuffer> UploadWeightAsBf16(
    const Stream& stream, DeviceAllocator& allocator, const Tensor& host,
    StageFn stage);

// Scales of an I8 tensor: one per block of each row (kernels/dtype.h).
int64_t I8ScaleCountOf(const Tensor& t);

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_WEIGHT_UPLOAD_H_
