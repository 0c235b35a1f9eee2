// A directory a benchmark makes for its files and removes on every exit
// path.
#ifndef TWICE_BENCH_SCRATCH_DIR_H_
#define TWICE_BENCH_SCRATCH_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace twice::bench {

// Removes `path` (when set) when it goes.
class TempDir {
 public:
  TempDir() = default;
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  TempDir& operator=(TempDir&& other) noexcept {
    std::swap(path_, other.path_);
    return *this;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

 private:
  std::string path_;
};

// A fresh directory under the system temp dir.
[[nodiscard]] inline absl::StatusOr<std::string> MakeTempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "twice-bench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("bench: cannot create a directory like ", pattern));
  }
  return pattern;
}

}  // namespace twice::bench

#endif  // TWICE_BENCH_SCRATCH_DIR_H_
