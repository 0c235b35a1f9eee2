// Debian 12's Abseil is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW is 0), which does not convert from
// std::string_view. The storage API speaks std::string_view, so views are
// converted here before they reach absl::StrCat and friends.
#ifndef TWICE_STORAGE_ABSL_VIEW_H_
#define TWICE_STORAGE_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace twice::storage {

inline absl::string_view AbslView(std::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace twice::storage

#endif  // TWICE_STORAGE_ABSL_VIEW_H_
