#include "storage/block_manifest.h"

#include <xxhash.h>

#include "absl/status/status.h"
#include "storage/blob_envelope.h"
#include "storage/byte_io.h"

namespace twice::storage {
namespace {

constexpr size_t kBlockRefBytes = sizeof(StateKey::digest) + 8 + 8;

}  // namespace

uint64_t BlockChecksum(std::string_view blob) {
  return XXH3_64bits(blob.data(), blob.size());
}

std::string EncodeManifest(const BlockManifest& manifest) {
  std::string payload;
  payload.reserve(20 + manifest.blocks.size() * kBlockRefBytes);
  AppendI64(payload, manifest.recompute_tokens);
  AppendI64(payload, manifest.written_unix_ms);
  AppendU32(payload, static_cast<uint32_t>(manifest.blocks.size()));
  for (const BlockRef& block : manifest.blocks) {
    payload.append(block.key.Bytes());
    AppendI64(payload, block.bytes);
    AppendU64(payload, block.checksum);
  }
  const std::string_view parts[] = {payload};
  return SealEnvelope(BlobKind::kBlockManifest, parts);
}

absl::StatusOr<BlockManifest> DecodeManifest(std::string_view stored) {
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(stored, BlobKind::kBlockManifest);
  if (!payload.ok()) return payload.status();
  ByteReader reader(*payload);
  BlockManifest manifest;
  uint32_t count = 0;
  if (!reader.ReadI64(manifest.recompute_tokens) ||
      !reader.ReadI64(manifest.written_unix_ms) || !reader.ReadU32(count)) {
    return absl::DataLossError("block manifest shorter than its header");
  }
  if (manifest.recompute_tokens < 0) {
    return absl::DataLossError("block manifest has negative recompute_tokens");
  }
  // Exact size first, so a corrupt count cannot cause a huge allocation.
  if (reader.remaining() != count * kBlockRefBytes) {
    return absl::DataLossError("block manifest count disagrees with its size");
  }
  manifest.blocks.resize(count);
  for (BlockRef& block : manifest.blocks) {
    std::string_view key;
    uint64_t checksum = 0;
    if (!reader.ReadBytes(sizeof(StateKey::digest), key) ||
        !reader.ReadI64(block.bytes) || !reader.ReadU64(checksum)) {
      return absl::DataLossError("block manifest is truncated");
    }
    absl::StatusOr<StateKey> parsed = StateKey::FromBytes(key);
    if (!parsed.ok() || block.bytes < 0) {
      return absl::DataLossError("block manifest has a malformed block");
    }
    block.key = *parsed;
    block.checksum = checksum;
  }
  return manifest;
}

}  // namespace twice::storage
