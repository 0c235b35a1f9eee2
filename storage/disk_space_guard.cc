#include "storage/disk_space_guard.h"

#include <sys/statvfs.h>

#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"

namespace twice::storage {

int64_t DiskSpaceGuard::FreeBytes() const {
  struct statvfs fs;
  if (statvfs(path_.c_str(), &fs) != 0) return -1;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

absl::Status DiskSpaceGuard::Check(std::string_view what, int64_t needed,
                                   int64_t floor) const {
  const int64_t free = FreeBytes();
  if (free < 0 || free >= needed + floor) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      AbslView(what), ": the store's disk is full: ", free, " bytes free in ",
      path_, ", ", needed, " needed beyond a reserve of ", floor,
      " (free space or raise the disk; --store_min_free_disk_bytes)"));
}

absl::Status DiskSpaceGuard::CheckPut(std::string_view what,
                                      int64_t incoming_bytes) const {
  return Check(what, incoming_bytes, reserve_bytes_);
}

absl::Status DiskSpaceGuard::CheckDelete(std::string_view what) const {
  return Check(what, 0, kDeleteFloorBytes);
}

}  // namespace twice::storage
