// Helpers shared by the libFuzzer targets of tests/fuzz.
#ifndef TWICE_TESTS_FUZZ_FUZZ_UTIL_H_
#define TWICE_TESTS_FUZZ_FUZZ_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace twice::fuzz {

// Stops the process loudly: a harness whose setup failed must not fuzz.
[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "fuzz setup failed: %s\n", what.c_str());
  std::abort();
}

inline void CheckOk(const absl::Status& status, const std::string& what) {
  if (!status.ok()) Die(what + ": " + status.ToString());
}

// A fresh directory under $TMPDIR (or /tmp), removed at exit.
inline std::string MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base != nullptr ? base : "/tmp") + "/twice_fuzz_XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) Die("mkdtemp");
  return templ;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::move(buf).str();
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) Die("cannot write " + path);
}

// A path in the source tree.
inline std::string SourcePath(const std::string& relative) {
  return std::string(TWICE_SOURCE_DIR) + "/" + relative;
}

// When TWICE_FUZZ_WRITE_SEEDS names a directory, harnesses that can build
// valid inputs themselves (encoded states) write them there as seeds.
inline void MaybeWriteSeed(const std::string& name, std::string_view bytes) {
  const char* dir = std::getenv("TWICE_FUZZ_WRITE_SEEDS");
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::create_directories(dir);
  WriteFile(std::string(dir) + "/" + name, bytes);
}

// WordLevel vocabulary "[UNK]" = 0, "w1" .. "w<vocab-2>", and
// "<|endoftext|>" = vocab - 1.
inline std::string WordLevelTokenizerJson(int vocab) {
  std::string v = "{\"[UNK]\": 0";
  for (int i = 1; i < vocab - 1; ++i) {
    v += ", \"w" + std::to_string(i) + "\": " + std::to_string(i);
  }
  v += ", \"<|endoftext|>\": " + std::to_string(vocab - 1) + "}";
  return R"({"version": "1.0", "added_tokens": [{"id": )" +
         std::to_string(vocab - 1) +
         R"(, "content": "<|endoftext|>", "special": true}],
      "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
      "decoder": null,
      "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": )" +
         v + "}}";
}

}  // namespace twice::fuzz

#endif  // TWICE_TESTS_FUZZ_FUZZ_UTIL_H_
