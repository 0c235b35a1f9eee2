#include "storage/state_value.h"

#include "absl/status/status.h"
#include "storage/blob_envelope.h"
#include "storage/byte_io.h"

namespace twice::storage {
namespace {

constexpr size_t kStateHeaderBytes = 16;
constexpr size_t kStateIndexBytes = 24;

}  // namespace

std::string EncodeStateValue(std::string_view blob, int64_t recompute_tokens,
                             int64_t written_unix_ms) {
  std::string header;
  AppendI64(header, recompute_tokens);
  AppendI64(header, written_unix_ms);
  const std::string_view parts[] = {header, blob};
  return SealEnvelope(BlobKind::kState, parts);
}

absl::StatusOr<StateValue> DecodeStateValue(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kState);
  if (!payload.ok()) return payload.status();
  ByteReader reader(*payload);
  StateValue value;
  if (!reader.ReadI64(value.recompute_tokens) ||
      !reader.ReadI64(value.written_unix_ms)) {
    return absl::DataLossError("state value shorter than its header");
  }
  if (value.recompute_tokens < 0) {
    return absl::DataLossError("state value has negative recompute_tokens");
  }
  value.blob = payload->substr(kStateHeaderBytes);
  return value;
}

std::string EncodeStateIndex(const StateIndexEntry& entry) {
  std::string payload;
  AppendI64(payload, entry.stored_bytes);
  AppendI64(payload, entry.recompute_tokens);
  AppendI64(payload, entry.written_unix_ms);
  const std::string_view parts[] = {payload};
  return SealEnvelope(BlobKind::kStateIndex, parts);
}

absl::StatusOr<StateIndexEntry> DecodeStateIndex(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kStateIndex);
  if (!payload.ok()) return payload.status();
  if (payload->size() != kStateIndexBytes) {
    return absl::DataLossError("state index entry has the wrong size");
  }
  ByteReader reader(*payload);
  StateIndexEntry entry;
  if (!reader.ReadI64(entry.stored_bytes) ||
      !reader.ReadI64(entry.recompute_tokens) ||
      !reader.ReadI64(entry.written_unix_ms)) {
    return absl::DataLossError("state index entry is truncated");
  }
  if (entry.stored_bytes < 0 || entry.recompute_tokens < 0) {
    return absl::DataLossError("state index entry has a negative field");
  }
  return entry;
}

}  // namespace twice::storage
