#include "storage/blob_envelope.h"

#include <xxhash.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/byte_io.h"

namespace twice::storage {
namespace {

constexpr std::string_view kMagic = "TWBE";

uint64_t Checksum(std::string_view header_and_payload) {
  return XXH3_64bits(header_and_payload.data(), header_and_payload.size());
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

absl::StatusOr<std::string_view> OpenEnvelope(std::string_view stored,
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
  const size_t checked_bytes = kEnvelopeHeaderBytes + payload_bytes;
  const uint64_t want = LoadU64(stored.data() + checked_bytes);
  if (Checksum(stored.substr(0, checked_bytes)) != want) {
    return absl::DataLossError("envelope checksum mismatch");
  }
  return stored.substr(kEnvelopeHeaderBytes, payload_bytes);
}

}  // namespace twice::storage
