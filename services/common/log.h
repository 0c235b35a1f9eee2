// Structured logs: one line per event on stderr, logfmt style
// (`ts=... level=info event=ingest.done doc=... tokens=...`), so they can be
// grepped by people and parsed by collectors. Thread-safe.
#ifndef TWICE_SERVICES_COMMON_LOG_H_
#define TWICE_SERVICES_COMMON_LOG_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace twice::services {

enum class LogLevel { kInfo, kWarning, kError };

// `fields` is already formatted as `key=value key=value`.
void Log(LogLevel level, std::string_view event, std::string_view fields = "");

// Quotes a value for logfmt when it contains spaces, quotes or '='.
std::string LogValue(std::string_view value);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_LOG_H_
