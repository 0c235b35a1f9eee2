#include "services/common/log.h"

#include <cstdio>
#include <mutex>

#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace twice::services {
namespace {

std::mutex& LogMutex() {
  static std::mutex mu;
  return mu;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void Log(LogLevel level, std::string_view event, std::string_view fields) {
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                          absl::UTCTimeZone());
  std::string line = absl::StrCat("ts=", ts, " level=", LevelName(level),
                                  " event=", std::string(event));
  if (!fields.empty()) absl::StrAppend(&line, " ", std::string(fields));
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(LogMutex());
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string LogValue(std::string_view value) {
  if (value.find_first_of(" \"=\t\n") == std::string_view::npos &&
      !value.empty()) {
    return std::string(value);
  }
  return absl::StrCat(
      "\"",
      absl::StrReplaceAll(std::string(value),
                          {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}),
      "\"");
}

}  // namespace twice::services
