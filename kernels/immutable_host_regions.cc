#include "kernels/immutable_host_regions.h"

#include <cstdint>
#include <map>
#include <mutex>

namespace twice::kernels {
namespace {

struct Registry {
  std::mutex mutex;
  uint64_t next_id = 1;
  // Start address -> region; regions do not overlap.
  std::map<uintptr_t, ImmutableHostRegion> by_start;
};

Registry& TheRegistry() {
  static auto* registry = new Registry();
  return *registry;
}

}  // namespace

uint64_t RegisterImmutableHostRegion(const void* data, size_t bytes) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const uint64_t id = r.next_id++;
  r.by_start[reinterpret_cast<uintptr_t>(data)] = {id, data, bytes};
  return id;
}

void UnregisterImmutableHostRegion(uint64_t id) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.by_start.begin(); it != r.by_start.end(); ++it) {
    if (it->second.id == id) {
      r.by_start.erase(it);
      return;
    }
  }
}

std::optional<ImmutableHostRegion> FindImmutableHostRegion(const void* data,
                                                           size_t bytes) {
  Registry& r = TheRegistry();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_start.upper_bound(begin);
  if (it == r.by_start.begin()) return std::nullopt;
  --it;
  const uintptr_t region_begin = it->first;
  const uintptr_t region_end = region_begin + it->second.bytes;
  if (begin < region_begin || begin + bytes > region_end) return std::nullopt;
  return it->second;
}

bool ImmutableHostRegionLive(uint64_t id) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [start, region] : r.by_start) {
    if (region.id == id) return true;
  }
  return false;
}

}  // namespace twice::kernels
