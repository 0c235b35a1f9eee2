#include "bench/harness/store_benchmark.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "storage/rocksdb_store.h"

namespace twice::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

// Nearest-rank percentile of `samples` (sorted in place).
double Percentile(std::vector<double>& samples, double p) {
  std::sort(samples.begin(), samples.end());
  const size_t rank = static_cast<size_t>(
      std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

std::string RandomBytes(int64_t n, uint64_t seed) {
  // Incompressible, so no layer can shortcut the bytes.
  std::mt19937_64 rng(seed);
  std::string out(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(absl::string_view(what.data(), what.size()), " ", path, ": ",
                   std::strerror(errno)));
}

absl::Status WriteFileSynced(const std::string& path, std::string_view bytes) {
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return Errno("open", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return Errno("write", path);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    close(fd);
    return Errno("fsync", path);
  }
  if (close(fd) != 0) return Errno("close", path);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReadFileWhole(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return Errno("open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return Errno("stat", path);
  }
  // Uninitialised, as an engine's state buffer would be.
  auto buffer = std::make_unique_for_overwrite<char[]>(st.st_size);
  int64_t done = 0;
  while (done < st.st_size) {
    const ssize_t n = read(fd, buffer.get() + done, st.st_size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return Errno("read", path);
    }
    done += n;
  }
  close(fd);
  return done;
}

absl::StatusOr<StoreBenchRow> MeasureSize(const std::string& dir, int64_t bytes,
                                          int iterations) {
  StoreBenchRow row;
  row.bytes = bytes;
  row.iterations = iterations;
  const std::string blob = RandomBytes(bytes, static_cast<uint64_t>(bytes));

  storage::RocksDbStoreOptions options;
  options.path = dir + "/store";
  options.sync_writes = true;
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(options);
  if (!store.ok()) return store.status();
  const storage::StateKey root = storage::RootKey("bench", "causal", "bench");
  std::vector<storage::StateKey> keys;

  // File and store operations alternate, so a disk or page cache that
  // slows down for a while (other processes share it) slows both alike.
  std::vector<double> file_writes, file_reads, puts, gets;
  for (int i = 0; i < iterations; ++i) {
    const std::string path = absl::StrCat(dir, "/file-", i);
    auto start = Clock::now();
    if (absl::Status s = WriteFileSynced(path, blob); !s.ok()) return s;
    file_writes.push_back(MillisSince(start));

    keys.push_back(storage::ChainKey(root, std::vector<int32_t>{i}));
    start = Clock::now();
    if (absl::Status s =
            (*store)->PutState(keys.back(), blob, {.recompute_tokens = 4096});
        !s.ok()) {
      return s;
    }
    puts.push_back(MillisSince(start));
  }
  // Flushed into blob files, then reopened: reads start from the files.
  if (absl::StatusOr<storage::CompactReport> c = (*store)->Compact(); !c.ok()) {
    return c.status();
  }
  store->reset();

  // Uncached: the store's cache off, blob files in the page cache (each
  // read once first, as the plain files are).
  std::vector<double> uncached_gets;
  storage::RocksDbStoreOptions uncached = options;
  uncached.state_cache_bytes = 0;
  store = storage::OpenRocksDbStore(uncached);
  if (!store.ok()) return store.status();
  for (int i = 0; i < iterations; ++i) {
    absl::StatusOr<int64_t> read =
        ReadFileWhole(absl::StrCat(dir, "/file-", i));
    absl::StatusOr<std::string> got = (*store)->GetState(keys[i]);
    if (!read.ok() || !got.ok() || got->size() != blob.size()) {
      return absl::InternalError("warm-up read failed");
    }
  }
  // Page-cache reads do not wait on the disk, so files and states are read
  // in separate loops, each with the allocator in its own steady state.
  for (int i = 0; i < iterations; ++i) {
    const auto start = Clock::now();
    absl::StatusOr<int64_t> read =
        ReadFileWhole(absl::StrCat(dir, "/file-", i));
    file_reads.push_back(MillisSince(start));
    if (!read.ok()) return read.status();
    if (*read != bytes) return absl::InternalError("short file read");
  }
  for (int i = 0; i < iterations; ++i) {
    const auto start = Clock::now();
    absl::StatusOr<std::string> got = (*store)->GetState(keys[i]);
    uncached_gets.push_back(MillisSince(start));
    if (!got.ok()) return got.status();
    if (*got != blob) return absl::InternalError("read back other bytes");
  }
  store->reset();

  // Warm: the states that fit the store's cache, read once, then read in
  // turn; files alternate as before.
  store = storage::OpenRocksDbStore(options);
  if (!store.ok()) return store.status();
  const int64_t fit = std::max<int64_t>(
      1, std::min<int64_t>(iterations, options.state_cache_bytes / bytes - 1));
  for (int64_t i = 0; i < fit; ++i) {
    if (!(*store)->GetState(keys[i]).ok()) {
      return absl::InternalError("warm-up read failed");
    }
  }
  for (int i = 0; i < iterations; ++i) {
    const auto start = Clock::now();
    absl::StatusOr<std::string> got = (*store)->GetState(keys[i % fit]);
    gets.push_back(MillisSince(start));
    if (!got.ok()) return got.status();
    if (*got != blob) return absl::InternalError("read back other bytes");
  }
  store->reset();
  std::error_code ignored;
  std::filesystem::remove_all(options.path, ignored);
  for (int i = 0; i < iterations; ++i) {
    std::filesystem::remove(absl::StrCat(dir, "/file-", i), ignored);
  }

  row.file_write_fsync_ms = Percentile(file_writes, 50);
  row.file_read_ms = Percentile(file_reads, 50);
  row.put_p50_ms = Percentile(puts, 50);
  row.put_p99_ms = Percentile(puts, 99);
  row.get_p50_ms = Percentile(gets, 50);
  row.get_p99_ms = Percentile(gets, 99);
  row.get_uncached_p50_ms = Percentile(uncached_gets, 50);
  row.get_uncached_p99_ms = Percentile(uncached_gets, 99);
  const double mb = static_cast<double>(bytes) / (1 << 20);
  row.put_mb_per_s = mb / (row.put_p50_ms / 1000);
  row.get_mb_per_s = mb / (row.get_p50_ms / 1000);
  return row;
}

}  // namespace

absl::StatusOr<std::vector<StoreBenchRow>> RunStoreBenchmark(
    const StoreBenchOptions& options) {
  if (options.iterations <= 0) {
    return absl::InvalidArgumentError("iterations must be positive");
  }
  for (int64_t bytes : options.sizes_bytes) {
    if (bytes <= 0) return absl::InvalidArgumentError("sizes must be positive");
  }
  std::string base = options.dir.empty()
                         ? std::filesystem::temp_directory_path().string()
                         : options.dir;
  std::string pattern = base + "/twice-bench-store-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return Errno("mkdtemp", pattern);
  }
  std::vector<StoreBenchRow> rows;
  absl::Status status;
  for (int64_t bytes : options.sizes_bytes) {
    absl::StatusOr<StoreBenchRow> row =
        MeasureSize(pattern, bytes, options.iterations);
    if (!row.ok()) {
      status = row.status();
      break;
    }
    rows.push_back(*row);
  }
  std::error_code ignored;
  std::filesystem::remove_all(pattern, ignored);
  if (!status.ok()) return status;
  return rows;
}

}  // namespace twice::bench
