// Binary encoding of a DocumentRecord, stored in an envelope of kind kRecord.
//
// Payload (integers little-endian; str = le32 length, then bytes):
//
//   u8   record format (kRecordFormat)
//   str  tenant, document_id, model, model_fingerprint, text_sha256
//   i64  token_count, segment_tokens
//   u32  segment count, then per segment: i64 end_token, 32-byte state key
//   u32  mode state count, then per entry: str mode, 32-byte state key
//   u8   pinned (0 or 1)
//   i64  created_unix_ms, accessed_unix_ms
//   i64  revision                  (format 2 and later)
//
// Format 1 records (written before conditional writes) have no revision
// field and decode as revision 1: they were written once at least, so a
// create (revision 0) over one is refused like any stale write.
//
// The record format is separate from the envelope version because records
// will gain fields; a decoder rejects a format it does not know rather than
// guessing. Decoding checks every length against the bytes that remain and
// requires the payload to be consumed exactly, so garbage is DATA_LOSS, never
// a crash or a huge allocation.
#ifndef TWICE_STORAGE_RECORD_CODEC_H_
#define TWICE_STORAGE_RECORD_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "storage/document_record.h"

namespace twice::storage {

inline constexpr uint8_t kRecordFormat = 2;
// The oldest record format DecodeRecord still reads.
inline constexpr uint8_t kOldestRecordFormat = 1;

// `record` must have passed ValidateDocumentRecord (record_validation.h).
std::string EncodeRecord(const DocumentRecord& record);
// DATA_LOSS when the envelope or any field is invalid.
[[nodiscard]] absl::StatusOr<DocumentRecord> DecodeRecord(
    std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RECORD_CODEC_H_
