// The CUDA runtime calls of Twice's host code, for a replayed device
// (cuda_replay.h): one device, memory from the host heap, work run in
// order as it is queued (a stream is a name; an event a time stamp), and
// stream capture recording the queued work into a graph that a launch runs
// again. What it checks as a device would: pageable host memory in a
// captured copy, a synchronization of a stream that is being captured;
// and, when strict (SetStrictDeviceMemory, for host code that allocates
// its device memory), copies and fills whose pointers do not match their
// direction (a host pointer where device memory belongs) and every pointer
// a kernel launch passes as an argument that is not device or pinned
// memory.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tests/cuda_replay/cuda_replay.h"

namespace twice::cuda_replay {
namespace {

struct Graph {
  std::vector<std::function<void()>> work;
};

struct Stream {
  Graph* capture = nullptr;  // the graph being recorded, if capturing
};

struct Event {
  std::chrono::steady_clock::time_point at;
};

// Device and pinned host allocations: [start, start + bytes).
struct Allocations {
  std::mutex mu;
  std::map<uintptr_t, size_t> device;
  std::map<uintptr_t, size_t> pinned;
};

bool g_strict = false;
thread_local cudaError_t g_last_error = cudaSuccess;

Allocations& Registry() {
  static auto* registry = new Allocations;
  return *registry;
}

bool Within(const std::map<uintptr_t, size_t>& blocks, const void* p,
            size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second;
}

bool IsDevice(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  return Within(Registry().device, p, bytes);
}
bool IsPinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  return Within(Registry().pinned, p, bytes);
}

cudaError_t Error(cudaError_t e) {
  if (e != cudaSuccess) g_last_error = e;
  return e;
}

Stream* AsStream(cudaStream_t s) { return reinterpret_cast<Stream*>(s); }

bool Capturing(cudaStream_t s) {
  return s != nullptr && AsStream(s)->capture != nullptr;
}

// Whether a copy of `count` bytes of `kind` fits its pointers.
bool CopyFits(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0 || !g_strict) return true;
  const bool dst_device = IsDevice(dst, count);
  const bool src_device = IsDevice(src, count);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return dst_device && !src_device;
    case cudaMemcpyDeviceToHost:
      return src_device && !dst_device;
    case cudaMemcpyDeviceToDevice:
      return dst_device && src_device;
    case cudaMemcpyHostToHost:
      return !dst_device && !src_device;
    default:
      return true;
  }
}

// A captured copy may not touch pageable host memory.
bool CapturableCopy(void* dst, const void* src, size_t count) {
  const auto usable = [&](const void* p) {
    return IsDevice(p, count) || IsPinned(p, count);
  };
  return count == 0 || (usable(dst) && usable(src));
}

}  // namespace

void SetStrictDeviceMemory(bool strict) { g_strict = strict; }

void CheckLaunchPointer(const void* p) {
  if (!g_strict || p == nullptr) return;
  Require(IsDevice(p, 1) || IsPinned(p, 1),
          "a kernel launch passes a pointer to memory the device cannot "
          "read (neither device nor pinned host memory)");
}

void Enqueue(cudaStream_t stream, std::function<void()> work) {
  if (Capturing(stream)) {
    AsStream(stream)->capture->work.push_back(std::move(work));
  } else {
    work();
  }
}

}  // namespace twice::cuda_replay

using twice::cuda_replay::AsStream;
using twice::cuda_replay::Capturing;
using twice::cuda_replay::Error;
using twice::cuda_replay::Registry;

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = twice::cuda_replay::g_last_error;
  twice::cuda_replay::g_last_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    default:
      return "cudaError (replay)";
  }
}
const char* cudaGetErrorString(cudaError_t error) {
  return cudaGetErrorName(error);
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : Error(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return Error(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, "CPU replay of the CUDA kernels",
               sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = size_t{16} << 30;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin =
      static_cast<size_t>(twice::cuda_replay::SharedMemoryOptin());
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr,
                                   int device) {
  if (device != 0) return Error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = twice::cuda_replay::SharedMemoryOptin();
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      return cudaSuccess;
    default:
      return Error(cudaErrorInvalidValue);
  }
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  const size_t bytes = (std::max<size_t>(size, 1) + 255) / 256 * 256;
  *ptr = std::aligned_alloc(256, bytes);
  if (*ptr == nullptr) return Error(cudaErrorMemoryAllocation);
  std::memset(*ptr, 0xFF, bytes);  // device memory is not zeroed
  std::lock_guard<std::mutex> lock(Registry().mu);
  Registry().device[reinterpret_cast<uintptr_t>(*ptr)] = size;
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(Registry().mu);
    if (Registry().device.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
      return Error(cudaErrorInvalidValue);
    }
  }
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) {
  *ptr = std::aligned_alloc(256, (std::max<size_t>(size, 1) + 255) / 256 * 256);
  if (*ptr == nullptr) return Error(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(Registry().mu);
  Registry().pinned[reinterpret_cast<uintptr_t>(*ptr)] = size;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(Registry().mu);
    if (Registry().pinned.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
      return Error(cudaErrorInvalidValue);
    }
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                            enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (!twice::cuda_replay::CopyFits(dst, src, count, kind)) {
    return Error(cudaErrorInvalidValue);
  }
  if (Capturing(stream) &&
      !twice::cuda_replay::CapturableCopy(dst, src, count)) {
    return Error(cudaErrorStreamCaptureUnsupported);
  }
  twice::cuda_replay::Enqueue(stream, [=] {
    if (count > 0) std::memmove(dst, src, count);
  });
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count,
                       enum cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, count, kind, nullptr);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src,
                              size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (height == 0 || width == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return Error(cudaErrorInvalidValue);
  const size_t dst_span = dpitch * (height - 1) + width;
  const size_t src_span = spitch * (height - 1) + width;
  if (!twice::cuda_replay::CopyFits(dst, src, std::min(dst_span, src_span),
                                    kind) ||
      (twice::cuda_replay::g_strict && kind == cudaMemcpyHostToDevice &&
       !twice::cuda_replay::IsDevice(dst, dst_span)) ||
      (twice::cuda_replay::g_strict && kind == cudaMemcpyDeviceToHost &&
       !twice::cuda_replay::IsDevice(src, src_span))) {
    return Error(cudaErrorInvalidValue);
  }
  twice::cuda_replay::Enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r) {
      std::memmove(static_cast<char*>(dst) + r * dpitch,
                   static_cast<const char*>(src) + r * spitch, width);
    }
  });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count,
                            cudaStream_t stream) {
  if (twice::cuda_replay::g_strict && count > 0 &&
      !twice::cuda_replay::IsDevice(ptr, count)) {
    return Error(cudaErrorInvalidValue);
  }
  twice::cuda_replay::Enqueue(stream, [=] { std::memset(ptr, value, count); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(new twice::cuda_replay::Stream);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return Error(cudaErrorInvalidValue);
  delete AsStream(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  // The work ran as it was queued; a capturing stream may not be waited on.
  return Capturing(stream) ? Error(cudaErrorStreamCaptureUnsupported)
                           : cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return Capturing(stream) ? Error(cudaErrorStreamCaptureUnsupported)
                           : cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   enum cudaStreamCaptureMode) {
  if (stream == nullptr || Capturing(stream)) {
    return Error(cudaErrorInvalidValue);
  }
  AsStream(stream)->capture = new twice::cuda_replay::Graph;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!Capturing(stream)) return Error(cudaErrorInvalidValue);
  *graph = reinterpret_cast<cudaGraph_t>(AsStream(stream)->capture);
  AsStream(stream)->capture = nullptr;
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus* status) {
  *status = Capturing(stream) ? cudaStreamCaptureStatusActive
                              : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new twice::cuda_replay::Graph(
      *reinterpret_cast<twice::cuda_replay::Graph*>(graph)));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  const auto* graph = reinterpret_cast<twice::cuda_replay::Graph*>(exec);
  for (const std::function<void()>& work : graph->work) {
    twice::cuda_replay::Enqueue(stream, work);
  }
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<twice::cuda_replay::Graph*>(exec);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<twice::cuda_replay::Graph*>(graph);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = reinterpret_cast<cudaEvent_t>(new twice::cuda_replay::Event);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  return cudaEventCreate(event);
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto* e = reinterpret_cast<twice::cuda_replay::Event*>(event);
  twice::cuda_replay::Enqueue(
      stream, [e] { e->at = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  const auto* a = reinterpret_cast<twice::cuda_replay::Event*>(start);
  const auto* b = reinterpret_cast<twice::cuda_replay::Event*>(end);
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<twice::cuda_replay::Event*>(event);
  return cudaSuccess;
}

}  // extern "C"
