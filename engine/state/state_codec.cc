// State codec, format version 1 (layout in state_codec.h):
//
//   "TWST" | u32 version = 1 | u32 header bytes |
//   header: string fingerprint | string dtype ("f32") | i64 token count |
//           u32 layer count |
//   per layer: string kind | u64 section bytes | section
//   (LayerState::Serialize:
//              its tensors as rank, dims, payload bytes, data) |
//   u64 XXH3_64 of every byte before it.
//
// Decoding order: magic, version, checksum (any flipped or missing byte is
// caught here), then the header against the target state, then each layer
// into a clone of the target, which replaces the target only when every
// byte has been accounted for.
#include "engine/state/state_codec.h"

#include <xxhash.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/state/state_io.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kMagic[4] = {'T', 'W', 'S', 'T'};
constexpr uint32_t kVersion = 1;
constexpr char kStateDType[] = "f32";
// magic + version + header length, and the trailing checksum.
constexpr size_t kPrefixBytes = 12;
constexpr size_t kChecksumBytes = 8;
// Limits on variable-length header fields.
constexpr uint32_t kMaxFingerprint = 256;
constexpr uint32_t kMaxName = 64;

void WriteHeader(const SequenceState& state, StateWriter& w) {
  w.WriteString(state.fingerprint());
  w.WriteString(kStateDType);
  w.WriteI64(state.token_count());
  w.WriteU32(static_cast<uint32_t>(state.num_layers()));
}

[[nodiscard]] absl::Status DecodeLayers(StateReader& reader,
                                        SequenceState& work) {
  for (int i = 0; i < work.num_layers(); ++i) {
    LayerState& layer = work.layer(i);
    TWICE_ASSIGN_OR_RETURN(std::string_view kind, reader.ReadString(kMaxName));
    if (kind != layer.kind()) {
      return absl::DataLossError(
          absl::StrCat("state blob: layer ", i, " is '", AbslView(kind),
                       "', the model expects '", AbslView(layer.kind()), "'"));
    }
    TWICE_ASSIGN_OR_RETURN(uint64_t section_bytes, reader.ReadU64());
    TWICE_ASSIGN_OR_RETURN(std::string_view section,
                           reader.ReadBytes(section_bytes));
    StateReader layer_reader(section);
    absl::Status s = layer.Deserialize(layer_reader);
    if (!s.ok()) {
      return absl::DataLossError(
          absl::StrCat("state blob: layer ", i, ": ", s.message()));
    }
    if (layer_reader.remaining() != 0) {
      return absl::DataLossError(absl::StrCat("state blob: layer ", i, " has ",
                                              layer_reader.remaining(),
                                              " unread bytes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeState(const SequenceState& state) {
  if (!state.SyncToHost().ok()) return std::string();  // see the header
  std::string out(kMagic, sizeof(kMagic));
  StateWriter w(&out);
  w.WriteU32(kVersion);
  w.WriteU32(static_cast<uint32_t>(
      CountBytes([&](StateWriter& c) { WriteHeader(state, c); })));
  WriteHeader(state, w);
  for (int i = 0; i < state.num_layers(); ++i) {
    const LayerState& layer = state.layer(i);
    w.WriteString(layer.kind());
    w.WriteU64(static_cast<uint64_t>(layer.ByteSize()));
    layer.Serialize(w);
  }
  w.WriteU64(XXH3_64bits(out.data(), out.size()));
  return out;
}

absl::Status DecodeStateInto(std::string_view blob, SequenceState& empty) {
  if (blob.size() < kPrefixBytes + kChecksumBytes) {
    return absl::DataLossError(
        absl::StrCat("state blob of ", blob.size(), " bytes is too short"));
  }
  if (std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a state blob (bad magic)");
  }
  StateReader prefix(blob.substr(sizeof(kMagic)));
  TWICE_ASSIGN_OR_RETURN(uint32_t version, prefix.ReadU32());
  if (version != kVersion) {
    return absl::DataLossError(
        absl::StrCat("state blob format version ", version,
                     " is not supported (expected ", kVersion, ")"));
  }
  const std::string_view body = blob.substr(0, blob.size() - kChecksumBytes);
  uint64_t stored_checksum;
  std::memcpy(&stored_checksum, blob.data() + body.size(), kChecksumBytes);
  if (XXH3_64bits(body.data(), body.size()) != stored_checksum) {
    return absl::DataLossError("state blob checksum mismatch");
  }

  TWICE_ASSIGN_OR_RETURN(uint32_t header_bytes, prefix.ReadU32());
  StateReader reader(body.substr(kPrefixBytes));
  TWICE_ASSIGN_OR_RETURN(std::string_view header,
                         reader.ReadBytes(header_bytes));
  StateReader h(header);
  TWICE_ASSIGN_OR_RETURN(std::string_view fingerprint,
                         h.ReadString(kMaxFingerprint));
  if (fingerprint != empty.fingerprint()) {
    return absl::FailedPreconditionError(
        absl::StrCat("state belongs to model ", AbslView(fingerprint),
                     ", not to ", empty.fingerprint()));
  }
  TWICE_ASSIGN_OR_RETURN(std::string_view dtype, h.ReadString(kMaxName));
  if (dtype != kStateDType) {
    return absl::FailedPreconditionError(
        absl::StrCat("state dtype '", AbslView(dtype),
                     "' is not supported (expected ", kStateDType, ")"));
  }
  TWICE_ASSIGN_OR_RETURN(int64_t token_count, h.ReadI64());
  TWICE_ASSIGN_OR_RETURN(uint32_t num_layers, h.ReadU32());
  if (token_count < 0 ||
      num_layers != static_cast<uint32_t>(empty.num_layers()) ||
      h.remaining() != 0) {
    return absl::DataLossError(absl::StrCat(
        "state blob header is inconsistent (token count ", token_count, ", ",
        num_layers, " layers for a model of ", empty.num_layers(), ")"));
  }

  std::unique_ptr<SequenceState> work = empty.Clone();
  TWICE_RETURN_IF_ERROR(DecodeLayers(reader, *work));
  if (reader.remaining() != 0) {
    return absl::DataLossError(
        absl::StrCat("state blob has ", reader.remaining(), " trailing bytes"));
  }
  work->set_token_count(token_count);
  empty = std::move(*work);
  return absl::OkStatus();
}

}  // namespace twice::engine
