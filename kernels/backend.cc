#include "kernels/backend.h"

#include <atomic>
#include <mutex>
#include <utility>

namespace twice::kernels {
namespace {

// The CPU path must stay as cheap as before: one relaxed flag read when no
// backend is installed, the shared_ptr copy (under the mutex) only when one
// is.
std::atomic<bool> backend_installed{false};

std::mutex& BackendMutex() {
  static std::mutex* mutex = new std::mutex();
  return *mutex;
}

std::shared_ptr<KernelBackend>& BackendSlot() {
  static auto* slot = new std::shared_ptr<KernelBackend>();
  return *slot;
}

}  // namespace

void SetKernelBackend(std::shared_ptr<KernelBackend> backend) {
  std::lock_guard<std::mutex> lock(BackendMutex());
  backend_installed.store(backend != nullptr, std::memory_order_release);
  BackendSlot() = std::move(backend);
}

std::shared_ptr<KernelBackend> ActiveKernelBackend() {
  if (!backend_installed.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(BackendMutex());
  return BackendSlot();
}

}  // namespace twice::kernels
