// bf16 device spans as the raw bits the launchers of launch.h take.
#ifndef TWICE_KERNELS_CUDA_SPAN_BITS_H_
#define TWICE_KERNELS_CUDA_SPAN_BITS_H_

#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/launch.h"

namespace twice::kernels::cuda {

inline const launch::bf16_bits* Bits(DeviceSpan<const Bf16> s) {
  return reinterpret_cast<const launch::bf16_bits*>(s.data);
}
inline launch::bf16_bits* Bits(DeviceSpan<Bf16> s) {
  return reinterpret_cast<launch::bf16_bits*>(s.data);
}

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_SPAN_BITS_H_
