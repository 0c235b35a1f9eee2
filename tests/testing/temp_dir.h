// A scratch directory that a test owns and removes with its contents: under
// $TEST_TMPDIR when set, else the system temp directory ($TMPDIR or /tmp).
#ifndef TWICE_TESTS_TESTING_TEMP_DIR_H_
#define TWICE_TESTS_TESTING_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace twice::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::error_code ignored;
    std::string pattern =
        (base != nullptr ? std::filesystem::path(base)
                         : std::filesystem::temp_directory_path(ignored)) /
        "twice-test-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be created.
  const std::string& path() const { return path_; }
  // `name` inside the directory.
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace twice::testing

#endif  // TWICE_TESTS_TESTING_TEMP_DIR_H_
