#include "storage/token_codec.h"

#include <bit>
#include <cstring>

#include "absl/status/status.h"
#include "storage/blob_envelope.h"
#include "storage/byte_io.h"

namespace twice::storage {

std::string EncodeTokens(absl::Span<const int32_t> tokens) {
  if constexpr (std::endian::native == std::endian::little) {
    // The in-memory ids already are the stored bytes.
    const std::string_view parts[] = {
        {reinterpret_cast<const char*>(tokens.data()),
         tokens.size() * sizeof(int32_t)}};
    return SealEnvelope(BlobKind::kTokens, parts);
  } else {
    std::string payload;
    payload.reserve(tokens.size() * sizeof(int32_t));
    for (int32_t t : tokens) AppendU32(payload, static_cast<uint32_t>(t));
    const std::string_view parts[] = {payload};
    return SealEnvelope(BlobKind::kTokens, parts);
  }
}

absl::StatusOr<std::vector<int32_t>> DecodeTokens(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kTokens);
  if (!payload.ok()) return payload.status();
  if (payload->size() % sizeof(int32_t) != 0) {
    return absl::DataLossError("token blob is not a whole number of ids");
  }
  std::vector<int32_t> tokens(payload->size() / sizeof(int32_t));
  if constexpr (std::endian::native == std::endian::little) {
    if (!tokens.empty()) {
      std::memcpy(tokens.data(), payload->data(), payload->size());
    }
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>(LoadU32(payload->data() + 4 * i));
    }
  }
  return tokens;
}

}  // namespace twice::storage
