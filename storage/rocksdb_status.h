// The one place a rocksdb::Status becomes an absl::Status (style rule 4).
//
// "Try again" and "the data is bad" stay apart:
//   UNAVAILABLE        busy, timed out, try again, incomplete, shutting down,
//                      an I/O error RocksDB marks retryable, and the LOCK file
//                      held by another process or instance
//   DATA_LOSS          corruption (a checksum or format failure)
//   RESOURCE_EXHAUSTED no space left, memory limit
//   NOT_FOUND, INVALID_ARGUMENT, ABORTED, UNIMPLEMENTED (not supported)
//   INTERNAL           everything else, including other I/O errors
#ifndef TWICE_STORAGE_ROCKSDB_STATUS_H_
#define TWICE_STORAGE_ROCKSDB_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "rocksdb/slice.h"
#include "rocksdb/status.h"

namespace twice::storage {

// OK for an OK status; otherwise the mapped code with the message
// "<context>: <RocksDB's message>".
[[nodiscard]] absl::Status FromRocksDb(const rocksdb::Status& status,
                                       std::string_view context);

// A view of `s` as RocksDB takes keys and values.
inline rocksdb::Slice ToSlice(std::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace twice::storage

#endif  // TWICE_STORAGE_ROCKSDB_STATUS_H_
