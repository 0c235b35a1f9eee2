// Structured logs: one line per event on stderr, so they can be grepped by
// people and parsed by collectors. Two formats (SetLogFormat, the server's
// --log-format flag):
//   logfmt (default): ts=... level=info event=ingest.done doc=... tokens=...
//   json: {"ts":"...","level":"info","event":"ingest.done","doc":"...",
//          "tokens":"..."}
// A line written while a thread serves a call also carries the call's
// request_id (services/common/request_id.h). Thread-safe.
#ifndef TWICE_SERVICES_COMMON_LOG_H_
#define TWICE_SERVICES_COMMON_LOG_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace twice::services {

enum class LogLevel { kInfo, kWarning, kError };
enum class LogFormat { kLogfmt, kJson };

// Process-wide; set once at start-up, before serving.
void SetLogFormat(LogFormat format);
// "logfmt" or "json"; INVALID_ARGUMENT otherwise.
[[nodiscard]] absl::Status ParseLogFormat(std::string_view text,
                                          LogFormat* format);

// `fields` is already formatted as `key=value key=value` (values quoted with
// LogValue); in json format each pair becomes a string member.
void Log(LogLevel level, std::string_view event, std::string_view fields = "");

// Quotes a value for logfmt when it contains spaces, quotes or '='.
std::string LogValue(std::string_view value);

// The json line for one event (what Log writes in json format, without the
// newline); exposed for tests.
std::string FormatJsonLogLine(std::string_view ts, std::string_view level,
                              std::string_view event, std::string_view fields,
                              std::string_view request_id);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_LOG_H_
