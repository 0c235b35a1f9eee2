// The envelope around every value the store writes (design §5, style rule 7).
//
// Layout (all integers little-endian), 24 bytes of overhead:
//
//   offset  size  field
//        0     4  magic "TWBE"
//        4     1  format version (kEnvelopeVersion)
//        5     1  kind (BlobKind)
//        6     2  reserved, zero
//        8     8  payload length n
//       16     n  payload
//     16+n     8  XXH3-64 of bytes [0, 16+n)
//
// The checksum covers the header too, so a flipped kind or length is caught
// even when it happens to look plausible. The payload's own layout (dtype,
// shapes of a state) belongs to whoever produced it; this layer makes sure
// the bytes handed back are the bytes that were stored.
#ifndef TWICE_STORAGE_BLOB_ENVELOPE_H_
#define TWICE_STORAGE_BLOB_ENVELOPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::storage {

enum class BlobKind : uint8_t {
  kState = 1,       // a state value (state_value.h)
  kRecord = 2,      // a document record (record_codec.h)
  kTokens = 3,      // a document's token ids (token_codec.h)
  kStateIndex = 4,  // a durable state's index entry (state_value.h)
};

inline constexpr uint8_t kEnvelopeVersion = 1;
inline constexpr size_t kEnvelopeHeaderBytes = 16;
inline constexpr size_t kEnvelopeOverheadBytes = kEnvelopeHeaderBytes + 8;

// Wraps the concatenation of `payload_parts` (taken as parts so a large state
// is copied once, not once per layer).
std::string SealEnvelope(BlobKind kind,
                         absl::Span<const std::string_view> payload_parts);

// Returns the payload, a view into `stored`. DATA_LOSS when anything is off:
// short or long input, magic, version, kind other than `expected`, reserved
// bits, length, checksum.
[[nodiscard]] absl::StatusOr<std::string_view> OpenEnvelope(
    std::string_view stored, BlobKind expected);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_BLOB_ENVELOPE_H_
