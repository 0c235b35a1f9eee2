// ImmutableHostRegions: host memory ranges whose bytes cannot change while
// they are registered (read-only mappings of weight files), so a device
// backend may upload them once and reuse the copy.
//
// Every registration gets a fresh id that is never reused; a cache keyed by
// (address, id) therefore never serves a stale copy, even when the same
// addresses are later mapped again for other bytes. The registrant must
// Unregister before the memory goes away (before munmap).
//
// Thread safety: all functions may be called from any thread.
#ifndef TWICE_KERNELS_IMMUTABLE_HOST_REGIONS_H_
#define TWICE_KERNELS_IMMUTABLE_HOST_REGIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

namespace twice::kernels {

struct ImmutableHostRegion {
  uint64_t id = 0;  // > 0
  const void* data = nullptr;
  size_t bytes = 0;
};

// Registers [data, data + bytes) (bytes > 0; ranges must not overlap a
// registered one). Returns the region's id.
uint64_t RegisterImmutableHostRegion(const void* data, size_t bytes);
// Forgets a region; unknown ids are ignored.
void UnregisterImmutableHostRegion(uint64_t id);
// The registered region that contains all of [data, data + bytes), if any.
std::optional<ImmutableHostRegion> FindImmutableHostRegion(const void* data,
                                                           size_t bytes);
// Whether region `id` is still registered.
bool ImmutableHostRegionLive(uint64_t id);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_IMMUTABLE_HOST_REGIONS_H_
