// Device memory for the CUDA kernels: typed views, one caching allocator,
// and host <-> device copies.
//
// DeviceAllocator hands out plain cudaMalloc blocks (no managed memory) and
// keeps freed blocks for reuse, keyed by a rounded size class:
//   < 1 MiB: the next power of two (>= 256 B); >= 1 MiB: a multiple of 2 MiB.
// Reuse is stream-ordered for ONE stream: a released block may be handed
// out again at once, which is safe when every kernel that touched it was
// queued on the stream the new owner uses. A caller that uses several
// streams synchronises before releasing a block another stream still reads.
// Thread-safe (one mutex). Outstanding DeviceBuffers must be destroyed
// before their allocator; Trim() returns cached blocks to the driver.
//
// Bf16 is the storage type of bfloat16 values on both sides (bit pattern of
// __nv_bfloat16), so host code needs no CUDA headers to build bf16 inputs.
#ifndef TWICE_KERNELS_CUDA_DEVICE_MEMORY_H_
#define TWICE_KERNELS_CUDA_DEVICE_MEMORY_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace twice::kernels::cuda {

struct Bf16 {
  uint16_t bits = 0;
};

// Round to nearest even (NaN stays NaN).
inline Bf16 ToBf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof(u));
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(u >> 16)};
}

inline float FromBf16(Bf16 value) {
  const uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// A device pointer with its element count. Does not own.
template <typename T>
struct DeviceSpan {
  T* data = nullptr;
  int64_t size = 0;

  operator DeviceSpan<const T>() const { return {data, size}; }  // NOLINT
  DeviceSpan subspan(int64_t offset, int64_t count) const {
    return {data + offset, count};
  }
};

class DeviceAllocator;

// One block from a DeviceAllocator; returns it to the allocator's cache on
// destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }  // as requested, not rounded
  template <typename T>
  DeviceSpan<T> span() const {
    return {static_cast<T*>(data_), bytes_ / static_cast<int64_t>(sizeof(T))};
  }

 private:
  friend class DeviceAllocator;
  DeviceBuffer(DeviceAllocator* owner, void* data, int64_t bytes,
               size_t size_class)
      : owner_(owner), data_(data), bytes_(bytes), size_class_(size_class) {}
  void Reset();

  DeviceAllocator* owner_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  size_t size_class_ = 0;
};

class DeviceAllocator {
 public:
  // Blocks live on `device` (cudaSetDevice is called before cudaMalloc).
  explicit DeviceAllocator(int device = 0) : device_(device) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A block of at least `bytes` (256-byte aligned; contents undefined).
  // bytes == 0 gives an empty buffer. RESOURCE_EXHAUSTED when the device is
  // out of memory even after the cache was trimmed.
  [[nodiscard]] absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes);
  // Typed convenience: count elements of T.
  template <typename T>
  [[nodiscard]] absl::StatusOr<DeviceBuffer> AllocateArray(int64_t count) {
    return Allocate(count * static_cast<int64_t>(sizeof(T)));
  }

  // Frees every cached (unused) block.
  void Trim();

  // Counters for tests and metrics.
  int64_t bytes_in_use() const;
  int64_t bytes_cached() const;
  int64_t malloc_calls() const;

  static size_t SizeClass(int64_t bytes);

 private:
  friend class DeviceBuffer;
  void Release(void* data, size_t size_class);
  void TrimLocked();

  const int device_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> blocks
  int64_t bytes_in_use_ = 0;
  int64_t bytes_cached_ = 0;
  int64_t malloc_calls_ = 0;
};

// Synchronous copies (queued on `stream`, which is then synchronised, so
// pageable host memory is fine). `stream` is a cudaStream_t; nullptr is the
// legacy default stream.
[[nodiscard]] absl::Status CopyToDevice(const void* host, void* device,
                                        int64_t bytes, void* stream = nullptr);
[[nodiscard]] absl::Status CopyToHost(const void* device, void* host,
                                      int64_t bytes, void* stream = nullptr);

template <typename T>
[[nodiscard]] absl::Status Upload(const std::vector<T>& host,
                                  DeviceSpan<T> device,
                                  void* stream = nullptr) {
  if (static_cast<int64_t>(host.size()) != device.size) {
    return absl::InvalidArgumentError("Upload: size mismatch");
  }
  return CopyToDevice(host.data(), device.data,
                      device.size * static_cast<int64_t>(sizeof(T)), stream);
}

template <typename T>
[[nodiscard]] absl::Status Download(DeviceSpan<const T> device,
                                    std::vector<T>& host,
                                    void* stream = nullptr) {
  host.resize(static_cast<size_t>(device.size));
  return CopyToHost(device.data, host.data(),
                    device.size * static_cast<int64_t>(sizeof(T)), stream);
}

}  // namespace twice::kernels::cuda

#endif  // TWICE_KERNELS_CUDA_DEVICE_MEMORY_H_
