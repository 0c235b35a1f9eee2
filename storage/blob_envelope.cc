#include "storage/blob_envelope.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/byte_io.h"

namespace twice::storage {
namespace {

constexpr std::string_view kMagic = "TWBE";

uint64_t Checksum(std::string_view header_and_payload) {
  return XXH3_64bits(header_and_payload.data(), header_and_payload.size());
}

// Checks everything but the checksum; returns the payload size.
absl::StatusOr<uint64_t> CheckHeader(std::string_view stored,
                                     BlobKind expected) {
  if (stored.size() < kEnvelopeOverheadBytes) {
    return absl::DataLossError(
        absl::StrCat("envelope of ", stored.size(), " bytes is too short"));
  }
  if (stored.substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError("envelope magic mismatch");
  }
  const auto version = static_cast<uint8_t>(stored[4]);
  if (version != kEnvelopeVersion) {
    return absl::DataLossError(
        absl::StrCat("unknown envelope version ", version));
  }
  const auto kind = static_cast<uint8_t>(stored[5]);
  if (kind != static_cast<uint8_t>(expected)) {
    return absl::DataLossError(absl::StrCat(
        "envelope kind ", kind, ", expected ", static_cast<int>(expected)));
  }
  if (stored[6] != 0 || stored[7] != 0) {
    return absl::DataLossError("envelope reserved bytes are not zero");
  }
  const uint64_t payload_bytes = LoadU64(stored.data() + 8);
  if (payload_bytes != stored.size() - kEnvelopeOverheadBytes) {
    return absl::DataLossError(
        absl::StrCat("envelope says ", payload_bytes, " payload bytes, holds ",
                     stored.size() - kEnvelopeOverheadBytes));
  }
  return payload_bytes;
}

}  // namespace

std::string SealEnvelope(BlobKind kind,
                         absl::Span<const std::string_view> payload_parts) {
  uint64_t payload_bytes = 0;
  for (std::string_view part : payload_parts) payload_bytes += part.size();

  std::string out;
  out.reserve(kEnvelopeOverheadBytes + payload_bytes);
  out.append(kMagic);
  AppendU8(out, kEnvelopeVersion);
  AppendU8(out, static_cast<uint8_t>(kind));
  AppendU8(out, 0);
  AppendU8(out, 0);
  AppendU64(out, payload_bytes);
  for (std::string_view part : payload_parts) out.append(part);
  AppendU64(out, Checksum(out));
  return out;
}

SealedEdges SealEnvelopeEdges(
    BlobKind kind, absl::Span<const std::string_view> payload_parts) {
  uint64_t payload_bytes = 0;
  for (std::string_view part : payload_parts) payload_bytes += part.size();
  SealedEdges edges;
  edges.head.append(kMagic);
  AppendU8(edges.head, kEnvelopeVersion);
  AppendU8(edges.head, static_cast<uint8_t>(kind));
  AppendU8(edges.head, 0);
  AppendU8(edges.head, 0);
  AppendU64(edges.head, payload_bytes);
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, edges.head.data(), edges.head.size());
  for (std::string_view part : payload_parts) {
    XXH3_64bits_update(&state, part.data(), part.size());
  }
  AppendU64(edges.tail, XXH3_64bits_digest(&state));
  return edges;
}

absl::StatusOr<std::string_view> OpenEnvelope(std::string_view stored,
                                              BlobKind expected) {
  absl::StatusOr<uint64_t> payload_bytes = CheckHeader(stored, expected);
  if (!payload_bytes.ok()) return payload_bytes.status();
  const size_t checked_bytes = kEnvelopeHeaderBytes + *payload_bytes;
  const uint64_t want = LoadU64(stored.data() + checked_bytes);
  if (Checksum(stored.substr(0, checked_bytes)) != want) {
    return absl::DataLossError("envelope checksum mismatch");
  }
  return stored.substr(kEnvelopeHeaderBytes, *payload_bytes);
}

absl::StatusOr<std::string_view> OpenEnvelopeAndCopy(std::string_view stored,
                                                     BlobKind expected,
                                                     size_t skip,
                                                     std::string* copy) {
  copy->clear();
  absl::StatusOr<uint64_t> payload_bytes = CheckHeader(stored, expected);
  if (!payload_bytes.ok()) return payload_bytes.status();
  if (skip > *payload_bytes) {
    return absl::DataLossError("envelope payload shorter than its header");
  }
  const size_t checked_bytes = kEnvelopeHeaderBytes + *payload_bytes;
  const size_t copy_begin = kEnvelopeHeaderBytes + skip;
  // Copy a chunk, then hash it from the destination while it is still in
  // cache: one trip through memory instead of a hash pass and a copy pass.
  constexpr size_t kChunkBytes = 256 << 10;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, stored.data(), copy_begin);
  copy->resize(checked_bytes - copy_begin);
  for (size_t offset = copy_begin; offset < checked_bytes;
       offset += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, checked_bytes - offset);
    char* out = copy->data() + (offset - copy_begin);
    std::memcpy(out, stored.data() + offset, n);
    XXH3_64bits_update(&state, out, n);
  }
  if (XXH3_64bits_digest(&state) != LoadU64(stored.data() + checked_bytes)) {
    copy->clear();
    return absl::DataLossError("envelope checksum mismatch");
  }
  return stored.substr(kEnvelopeHeaderBytes, *payload_bytes);
}

std::optional<BlobKind> PeekEnvelopeKind(std::string_view stored) {
  if (stored.size() < kEnvelopeOverheadBytes ||
      stored.substr(0, kMagic.size()) != kMagic) {
    return std::nullopt;
  }
  return static_cast<BlobKind>(static_cast<uint8_t>(stored[5]));
}

}  // namespace twice::storage
