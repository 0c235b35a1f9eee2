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
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::storage {

enum class BlobKind : uint8_t {
  kState = 1,          // a state value (state_value.h)
  kRecord = 2,         // a document record (record_codec.h)
  kTokens = 3,         // a document's token ids (token_codec.h)
  kStateIndex = 4,     // a durable state's index entry (state_value.h)
  kBlockManifest = 5,  // the block list of a chunked state (block_manifest.h)
  kRef = 6,            // a record's reference to a state (state_ref.h)
};

inline constexpr uint8_t kEnvelopeVersion = 1;
inline constexpr size_t kEnvelopeHeaderBytes = 16;
inline constexpr size_t kEnvelopeOverheadBytes = kEnvelopeHeaderBytes + 8;

// Wraps the concatenation of `payload_parts` (taken as parts so a large state
// is copied once, not once per layer).
std::string SealEnvelope(BlobKind kind,
                         absl::Span<const std::string_view> payload_parts);

// The same envelope as SealEnvelope, as the bytes before and after the
// payload parts, for writers that hand the parts to RocksDB without joining
// them (a multi-megabyte state is then not copied once more). The stored
// value is head + parts + tail.
struct SealedEdges {
  std::string head;  // header and the first part when it is small
  std::string tail;  // checksum
};
SealedEdges SealEnvelopeEdges(BlobKind kind,
                              absl::Span<const std::string_view> payload_parts);

// Returns the payload, a view into `stored`. DATA_LOSS when anything is off:
// short or long input, magic, version, kind other than `expected`, reserved
// bits, length, checksum.
[[nodiscard]] absl::StatusOr<std::string_view> OpenEnvelope(
    std::string_view stored, BlobKind expected);

// OpenEnvelope that also copies payload bytes [skip, end) to `*copy` (which
// it replaces), verifying the checksum in the same pass as the copy so a
// large value is read from memory once rather than twice. `*copy` is empty
// unless the result is OK.
[[nodiscard]] absl::StatusOr<std::string_view> OpenEnvelopeAndCopy(
    std::string_view stored, BlobKind expected, size_t skip, std::string* copy);

// The kind byte of something that looks like an envelope, without verifying
// it (OpenEnvelope does that); nullopt when it is too short or lacks the
// magic. Lets a reader pick the decoder for a value that may be one of
// several kinds.
std::optional<BlobKind> PeekEnvelopeKind(std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_BLOB_ENVELOPE_H_
