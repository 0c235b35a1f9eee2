#include "storage/record_codec.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"
#include "storage/blob_envelope.h"
#include "storage/byte_io.h"

namespace twice::storage {
namespace {

constexpr size_t kKeyBytes = sizeof(StateKey::digest);
// Smallest encodings, used to bound counts before allocating for them.
constexpr size_t kMinSegmentBytes = 8 + kKeyBytes;
constexpr size_t kMinModeStateBytes = 4 + kKeyBytes;

bool ReadKey(ByteReader& reader, StateKey& key) {
  std::string_view bytes;
  if (!reader.ReadBytes(kKeyBytes, bytes)) return false;
  absl::StatusOr<StateKey> parsed = StateKey::FromBytes(bytes);
  if (!parsed.ok()) return false;
  key = *parsed;
  return true;
}

bool ReadString(ByteReader& reader, std::string& out) {
  std::string_view view;
  if (!reader.ReadLengthPrefixed(view)) return false;
  out.assign(view);
  return true;
}

absl::Status Truncated(std::string_view what) {
  return absl::DataLossError(absl::StrCat(
      "document record is truncated or malformed at ", AbslView(what)));
}

}  // namespace

std::string EncodeRecord(const DocumentRecord& record) {
  std::string payload;
  AppendU8(payload, kRecordFormat);
  AppendLengthPrefixed(payload, record.tenant);
  AppendLengthPrefixed(payload, record.document_id);
  AppendLengthPrefixed(payload, record.model);
  AppendLengthPrefixed(payload, record.model_fingerprint);
  AppendLengthPrefixed(payload, record.text_sha256);
  AppendI64(payload, record.token_count);
  AppendI64(payload, record.segment_tokens);
  AppendU32(payload, static_cast<uint32_t>(record.segments.size()));
  for (const SegmentBoundary& segment : record.segments) {
    AppendI64(payload, segment.end_token);
    payload.append(segment.state_key.Bytes());
  }
  AppendU32(payload, static_cast<uint32_t>(record.mode_states.size()));
  for (const auto& [mode, key] : record.mode_states) {
    AppendLengthPrefixed(payload, mode);
    payload.append(key.Bytes());
  }
  AppendU8(payload, record.pinned ? 1 : 0);
  AppendI64(payload, record.created_unix_ms);
  AppendI64(payload, record.accessed_unix_ms);
  AppendI64(payload, record.revision);
  const std::string_view parts[] = {payload};
  return SealEnvelope(BlobKind::kRecord, parts);
}

absl::StatusOr<DocumentRecord> DecodeRecord(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kRecord);
  if (!payload.ok()) return payload.status();
  ByteReader reader(*payload);

  uint8_t format = 0;
  if (!reader.ReadU8(format)) return Truncated("format");
  if (format < kOldestRecordFormat || format > kRecordFormat) {
    return absl::DataLossError(
        absl::StrCat("unknown document record format ", format));
  }

  DocumentRecord record;
  if (!ReadString(reader, record.tenant) ||
      !ReadString(reader, record.document_id) ||
      !ReadString(reader, record.model) ||
      !ReadString(reader, record.model_fingerprint) ||
      !ReadString(reader, record.text_sha256) ||
      !reader.ReadI64(record.token_count) ||
      !reader.ReadI64(record.segment_tokens)) {
    return Truncated("header fields");
  }

  uint32_t segment_count = 0;
  if (!reader.ReadU32(segment_count) ||
      segment_count > reader.remaining() / kMinSegmentBytes) {
    return Truncated("segment count");
  }
  record.segments.resize(segment_count);
  for (SegmentBoundary& segment : record.segments) {
    if (!reader.ReadI64(segment.end_token) ||
        !ReadKey(reader, segment.state_key)) {
      return Truncated("segments");
    }
  }

  uint32_t mode_count = 0;
  if (!reader.ReadU32(mode_count) ||
      mode_count > reader.remaining() / kMinModeStateBytes) {
    return Truncated("mode state count");
  }
  record.mode_states.resize(mode_count);
  for (auto& [mode, key] : record.mode_states) {
    if (!ReadString(reader, mode) || !ReadKey(reader, key)) {
      return Truncated("mode states");
    }
  }

  uint8_t pinned = 0;
  if (!reader.ReadU8(pinned) || pinned > 1) return Truncated("pinned");
  record.pinned = pinned == 1;
  if (!reader.ReadI64(record.created_unix_ms) ||
      !reader.ReadI64(record.accessed_unix_ms)) {
    return Truncated("timestamps");
  }
  record.revision = 1;
  if (format >= 2 &&
      (!reader.ReadI64(record.revision) || record.revision < 0)) {
    return Truncated("revision");
  }
  if (reader.remaining() != 0) {
    return absl::DataLossError(absl::StrCat(
        "document record has ", reader.remaining(), " trailing bytes"));
  }
  return record;
}

}  // namespace twice::storage
