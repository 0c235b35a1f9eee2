// Debian 12's Abseil has its own absl::string_view (ABSL_OPTION_USE_STD_
// STRING_VIEW is 0), which does not convert from std::string_view. Engine
// code speaks std::string_view and converts here before absl::StrCat & co.
#ifndef TWICE_ENGINE_UTIL_ABSL_VIEW_H_
#define TWICE_ENGINE_UTIL_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace twice::engine {

inline absl::string_view AbslView(std::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace twice::engine

#endif  // TWICE_ENGINE_UTIL_ABSL_VIEW_H_
