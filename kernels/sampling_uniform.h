// SamplingUniform: the uniform draw of sampled decoding, as a pure function
// of (seed, draw index) so that the CPU and a device pick the same token
// from the same logits, and a sequence gets the same tokens whether it is
// stepped alone or in a batch, resumed or not. `draw` is the index of the
// token within its generation (0 for the first token sampled).
//
// u = top 53 bits of SplitMix64 at position draw + 1 of the stream that
// starts at mix(seed), times 2^-53: in [0, 1), the same bits on every
// compiler and device.
#ifndef TWICE_KERNELS_SAMPLING_UNIFORM_H_
#define TWICE_KERNELS_SAMPLING_UNIFORM_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TWICE_HOST_DEVICE __host__ __device__
#else
#define TWICE_HOST_DEVICE
#endif

namespace twice::kernels {

// SplitMix64's output function (Steele, Lea and Flood 2014).
TWICE_HOST_DEVICE inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TWICE_HOST_DEVICE inline double SamplingUniform(uint64_t seed, uint64_t draw) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  const uint64_t bits =
      SplitMix64Mix(SplitMix64Mix(seed) + kGolden * (draw + 1));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_SAMPLING_UNIFORM_H_
