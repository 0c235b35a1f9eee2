#include "storage/state_value.h"

#include <bit>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/blob_envelope.h"
#include "storage/byte_io.h"
#include "storage/record_validation.h"

namespace twice::storage {
namespace {

constexpr size_t kStateHeaderBytes = 16;
constexpr size_t kStateIndexV1Bytes = 24;
constexpr size_t kStateIndexV2Bytes = 33;

}  // namespace

std::string EncodeStateValue(std::string_view blob, int64_t recompute_tokens,
                             int64_t written_unix_ms) {
  std::string header;
  AppendI64(header, recompute_tokens);
  AppendI64(header, written_unix_ms);
  const std::string_view parts[] = {header, blob};
  return SealEnvelope(BlobKind::kState, parts);
}

StateValueEdges EncodeStateValueEdges(std::string_view blob,
                                      int64_t recompute_tokens,
                                      int64_t written_unix_ms) {
  std::string header;
  AppendI64(header, recompute_tokens);
  AppendI64(header, written_unix_ms);
  const std::string_view parts[] = {header, blob};
  SealedEdges edges = SealEnvelopeEdges(BlobKind::kState, parts);
  StateValueEdges out;
  out.head = std::move(edges.head) + header;
  out.tail = std::move(edges.tail);
  out.stored_bytes =
      static_cast<int64_t>(out.head.size() + blob.size() + out.tail.size());
  return out;
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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

absl::StatusOr<StateValue> DecodeStateValueCopy(std::string_view stored,
                                                std::string* blob) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelopeAndCopy(stored, BlobKind::kState, kStateHeaderBytes, blob);
  if (!payload.ok()) return payload.status();
  ByteReader reader(*payload);
  StateValue value;
  if (!reader.ReadI64(value.recompute_tokens) ||
      !reader.ReadI64(value.written_unix_ms) || value.recompute_tokens < 0) {
    blob->clear();
    return absl::DataLossError("state value header is invalid");
  }
  return value;
}

std::string EncodeStateIndex(const StateIndexEntry& entry) {
  std::string payload;
  AppendI64(payload, entry.stored_bytes);
  AppendI64(payload, entry.recompute_tokens);
  AppendI64(payload, entry.written_unix_ms);
  AppendU64(payload, std::bit_cast<uint64_t>(entry.flops_per_token));
  AppendU8(payload, static_cast<uint8_t>(entry.form));
  AppendLengthPrefixed(payload, entry.tenant);
  const std::string_view parts[] = {payload};
  return SealEnvelope(BlobKind::kStateIndex, parts);
}

absl::StatusOr<StateIndexEntry> DecodeStateIndex(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kStateIndex);
  if (!payload.ok()) return payload.status();
  if (payload->size() != kStateIndexV1Bytes &&
      payload->size() < kStateIndexV2Bytes) {
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
  if (payload->size() == kStateIndexV1Bytes) return entry;
  uint64_t flops_bits = 0;
  uint8_t form = 0;
  if (!reader.ReadU64(flops_bits) || !reader.ReadU8(form)) {
    return absl::DataLossError("state index entry is truncated");
  }
  entry.flops_per_token = std::bit_cast<double>(flops_bits);
  if (!std::isfinite(entry.flops_per_token) || entry.flops_per_token < 0) {
    return absl::DataLossError("state index entry has a bad flops_per_token");
  }
  if (form > static_cast<uint8_t>(StateForm::kBlock)) {
    return absl::DataLossError(
        absl::StrCat("state index entry has unknown form ", form));
  }
  entry.form = static_cast<StateForm>(form);
  if (payload->size() == kStateIndexV2Bytes) return entry;
  std::string_view tenant;
  if (!reader.ReadLengthPrefixed(tenant) || reader.remaining() != 0 ||
      tenant.size() > kMaxRecordFieldBytes) {
    return absl::DataLossError("state index entry has a bad tenant length");
  }
  entry.tenant = std::string(tenant);
  return entry;
}

}  // namespace twice::storage
