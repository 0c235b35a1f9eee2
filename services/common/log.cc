#include "services/common/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "services/common/request_id.h"

namespace twice::services {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kLogfmt};

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

// Splits `key=value key="quoted \"value\""` into pairs; a token without '='
// becomes a pair with an empty value.
std::vector<std::pair<std::string, std::string>> ParseLogfmt(
    std::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size()) break;
    const size_t key_start = i;
    while (i < text.size() && text[i] != '=' && text[i] != ' ') ++i;
    std::string key(text.substr(key_start, i - key_start));
    std::string value;
    if (i < text.size() && text[i] == '=') {
      ++i;
      if (i < text.size() && text[i] == '"') {
        ++i;
        while (i < text.size() && text[i] != '"') {
          if (text[i] == '\\' && i + 1 < text.size()) {
            ++i;
            value.push_back(text[i] == 'n' ? '\n' : text[i]);
          } else {
            value.push_back(text[i]);
          }
          ++i;
        }
        if (i < text.size()) ++i;  // closing quote
      } else {
        const size_t value_start = i;
        while (i < text.size() && text[i] != ' ') ++i;
        value.assign(text.substr(value_start, i - value_start));
      }
    }
    pairs.emplace_back(std::move(key), std::move(value));
  }
  return pairs;
}

}  // namespace

void SetLogFormat(LogFormat format) { g_format.store(format); }

absl::Status ParseLogFormat(std::string_view text, LogFormat* format) {
  if (text == "logfmt") {
    *format = LogFormat::kLogfmt;
  } else if (text == "json") {
    *format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown log format '", std::string(text), "' (logfmt | json)"));
  }
  return absl::OkStatus();
}

std::string FormatJsonLogLine(std::string_view ts, std::string_view level,
                              std::string_view event, std::string_view fields,
                              std::string_view request_id) {
  // Keys in the order written; nlohmann's ordered_json keeps it.
  nlohmann::ordered_json line;
  line["ts"] = std::string(ts);
  line["level"] = std::string(level);
  line["event"] = std::string(event);
  if (!request_id.empty()) line["request_id"] = std::string(request_id);
  for (auto& [key, value] : ParseLogfmt(fields)) {
    if (key.empty() || line.contains(key)) continue;
    line[key] = std::move(value);
  }
  // Invalid UTF-8 in a value is replaced, never thrown.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Log(LogLevel level, std::string_view event, std::string_view fields) {
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                          absl::UTCTimeZone());
  const std::string& request_id = CurrentRequestId();
  std::string line;
  if (g_format.load() == LogFormat::kJson) {
    line = FormatJsonLogLine(ts, LevelName(level), event, fields, request_id);
  } else {
    line = absl::StrCat("ts=", ts, " level=", LevelName(level),
                        " event=", std::string(event));
    if (!request_id.empty()) absl::StrAppend(&line, " request_id=", request_id);
    if (!fields.empty()) absl::StrAppend(&line, " ", std::string(fields));
  }
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
