// UTF-8 checks for the text the CLI sends. A proto3 `string` field must
// hold valid UTF-8: a message that does not cannot be parsed by the server,
// which then sees no message at all. So the CLI checks a file before
// sending it and cuts it into messages only between characters.
#ifndef TWICE_SERVICES_CLI_UTF8_TEXT_H_
#define TWICE_SERVICES_CLI_UTF8_TEXT_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace twice::cli {

// Offset of the first byte of `text` that does not start a valid UTF-8
// character (RFC 3629: no overlongs, no surrogates, at most U+10FFFF);
// nullopt when all of it is valid.
std::optional<size_t> FirstInvalidUtf8Byte(std::string_view text);

// INVALID_ARGUMENT naming `path`, the offset and value of the first bad
// byte, and what to do instead; OK for valid UTF-8.
[[nodiscard]] absl::Status CheckUtf8File(std::string_view path,
                                         std::string_view text);

// Text per streamed message of an ingest or an append: well under gRPC's
// 4 MiB message limit.
inline constexpr size_t kTextChunkBytes = 1 << 20;

// The end of the piece of valid UTF-8 `text` that starts at `offset` and
// holds at most `max_bytes` bytes, moved back so no character is split
// (always past `offset` when anything is left).
size_t Utf8PieceEnd(std::string_view text, size_t offset, size_t max_bytes);

}  // namespace twice::cli

#endif  // TWICE_SERVICES_CLI_UTF8_TEXT_H_
