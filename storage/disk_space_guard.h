// Refuses store writes before the disk under the store runs out, so RocksDB
// never meets ENOSPC on the request path: a write that fails half-way there
// turns the database read-only, and Debian's librocksdb (built with
// assertions) aborts the process on the next write to the failed log file.
// Refusing early keeps every acknowledged write readable and the process up;
// writes resume by themselves once space is freed.
#ifndef TWICE_STORAGE_DISK_SPACE_GUARD_H_
#define TWICE_STORAGE_DISK_SPACE_GUARD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace twice::storage {

class DiskSpaceGuard {
 public:
  // `path`: a directory on the store's file system. Puts need
  // `reserve_bytes` free beyond their own size; deletes (which free space
  // but still write a log record) need only kDeleteFloorBytes.
  DiskSpaceGuard(std::string path, int64_t reserve_bytes)
      : path_(std::move(path)), reserve_bytes_(reserve_bytes) {}

  static constexpr int64_t kDeleteFloorBytes = int64_t{4} << 20;

  // OK when `incoming_bytes` can be written with the reserve left over;
  // RESOURCE_EXHAUSTED naming `what`, the free bytes and the reserve
  // otherwise. A file system that cannot be asked is not a reason to
  // refuse (OK).
  [[nodiscard]] absl::Status CheckPut(std::string_view what,
                                      int64_t incoming_bytes) const;
  [[nodiscard]] absl::Status CheckDelete(std::string_view what) const;

  // Bytes available to this process on the file system, or -1.
  int64_t FreeBytes() const;

 private:
  absl::Status Check(std::string_view what, int64_t needed,
                     int64_t floor) const;

  std::string path_;
  int64_t reserve_bytes_;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_DISK_SPACE_GUARD_H_
