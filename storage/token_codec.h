// A document's token ids: an envelope of kind kTokens whose payload is the
// ids as little-endian int32, nothing else (the count is payload bytes / 4).
#ifndef TWICE_STORAGE_TOKEN_CODEC_H_
#define TWICE_STORAGE_TOKEN_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::storage {

std::string EncodeTokens(absl::Span<const int32_t> tokens);
// DATA_LOSS when the envelope is invalid or the payload is not whole ids.
[[nodiscard]] absl::StatusOr<std::vector<int32_t>> DecodeTokens(
    std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_TOKEN_CODEC_H_
