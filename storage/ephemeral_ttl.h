// Expiry of ephemeral states.
//
// Each state value carries its write time (state_value.h), so expiry needs
// no second key or column family: reads treat an expired value as missing
// and delete it, and EphemeralTtlFilter, installed as the compaction filter
// of the ephemeral column family, drops expired values when RocksDB compacts
// them. DBWithTTL was not used: it appends its own timestamp to the values of
// every column family of the database and still returns expired values
// until a compaction runs, so reads would need this check anyway.
#ifndef TWICE_STORAGE_EPHEMERAL_TTL_H_
#define TWICE_STORAGE_EPHEMERAL_TTL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "rocksdb/compaction_filter.h"

namespace twice::storage {

// Milliseconds since the Unix epoch from the system clock.
int64_t UnixMillisNow();

// Whether a value written at `written_unix_ms` has outlived `ttl_ms` at
// `now_unix_ms`. A value that claims to come from the future is kept: the
// clock may have stepped back, and a wrongly kept ephemeral state is cheaper
// than a wrongly dropped one.
inline bool IsExpired(int64_t written_unix_ms, int64_t now_unix_ms,
                      int64_t ttl_ms) {
  return now_unix_ms - written_unix_ms >= ttl_ms;
}

// Drops expired ephemeral states during compaction, and values that do not
// decode (a read could never return them; each is counted in
// `*corruptions`). Thread-safe: RocksDB calls one instance from many
// compaction threads. Must outlive the database that uses it.
class EphemeralTtlFilter : public rocksdb::CompactionFilter {
 public:
  EphemeralTtlFilter(int64_t ttl_ms, std::function<int64_t()> now_unix_ms,
                     std::atomic<int64_t>* corruptions);

  bool Filter(int level, const rocksdb::Slice& key,
              const rocksdb::Slice& existing_value, std::string* new_value,
              bool* value_changed) const override;
  const char* Name() const override { return "twice.EphemeralTtlFilter"; }

 private:
  const int64_t ttl_ms_;
  const std::function<int64_t()> now_unix_ms_;
  std::atomic<int64_t>* const corruptions_;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_EPHEMERAL_TTL_H_
