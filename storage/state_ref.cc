#include "storage/state_ref.h"

#include "absl/status/status.h"
#include "storage/blob_envelope.h"

namespace twice::storage {
namespace {

constexpr size_t kKeyBytes = sizeof(StateKey::digest);

}  // namespace

std::string RefKey(const StateKey& state, std::string_view document_key) {
  std::string key;
  key.reserve(kKeyBytes + document_key.size());
  key.append(state.Bytes());
  key.append(document_key);
  return key;
}

absl::StatusOr<RefKeyParts> ParseRefKey(std::string_view key) {
  // The shortest document key is "t\0d".
  if (key.size() < kKeyBytes + 3) {
    return absl::DataLossError("ref key is too short");
  }
  absl::StatusOr<StateKey> state =
      StateKey::FromBytes(key.substr(0, kKeyBytes));
  if (!state.ok()) return absl::DataLossError(state.status().message());
  return RefKeyParts{*state, key.substr(kKeyBytes)};
}

std::string EncodeRef(bool pinned) {
  const char flag = pinned ? 1 : 0;
  const std::string_view parts[] = {std::string_view(&flag, 1)};
  return SealEnvelope(BlobKind::kRef, parts);
}

absl::StatusOr<bool> DecodeRef(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kRef);
  if (!payload.ok()) return payload.status();
  if (payload->size() != 1 || static_cast<uint8_t>((*payload)[0]) > 1) {
    return absl::DataLossError("ref value is malformed");
  }
  return (*payload)[0] == 1;
}

}  // namespace twice::storage
