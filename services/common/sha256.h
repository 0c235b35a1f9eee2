// Hex SHA-256 of bytes: document text hashes (DocumentRecord.text_sha256)
// and tokenizer identity (ModelInfo.tokenizer_sha256).
#ifndef TWICE_SERVICES_COMMON_SHA256_H_
#define TWICE_SERVICES_COMMON_SHA256_H_

#include <string>
#include <string_view>

namespace twice::services {

// Lower-case hex, 64 characters.
std::string HexSha256(std::string_view bytes);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_SHA256_H_
