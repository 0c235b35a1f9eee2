#include "services/common/proto_convert.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace twice::services {
namespace {

// Extra whole-document states are recorded by mode name; the wire names the
// modes by enum.
constexpr char kPrefixModeName[] = "prefix";

}  // namespace

v1::StateKey ToProto(const storage::StateKey& key) {
  v1::StateKey out;
  out.set_digest(std::string(key.Bytes()));
  return out;
}

absl::StatusOr<storage::StateKey> FromProto(const v1::StateKey& key) {
  return storage::StateKey::FromBytes(key.digest());
}

absl::StatusOr<engine::PrefillMode> FromProto(v1::PrefillMode mode) {
  switch (mode) {
    case v1::PREFILL_MODE_UNSPECIFIED:
    case v1::PREFILL_MODE_CAUSAL:
      return engine::PrefillMode::kCausal;
    case v1::PREFILL_MODE_PREFIX:
      return engine::PrefillMode::kPrefix;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown prefill mode ", static_cast<int>(mode)));
  }
}

v1::DocumentInfo ToDocumentInfo(const storage::DocumentRecord& record) {
  v1::DocumentInfo info;
  info.set_document_id(record.document_id);
  info.set_model(record.model);
  info.set_tokens(record.token_count);
  for (const storage::SegmentBoundary& segment : record.segments) {
    v1::SegmentBoundary* out = info.add_segments();
    out->set_end_token(segment.end_token);
    *out->mutable_state_key() = ToProto(segment.state_key);
  }
  info.set_pinned(record.pinned);
  info.set_created_unix_ms(record.created_unix_ms);
  info.set_accessed_unix_ms(record.accessed_unix_ms);
  info.set_text_sha256(record.text_sha256);
  info.add_prepared_modes(v1::PREFILL_MODE_CAUSAL);
  for (const auto& [mode, key] : record.mode_states) {
    if (mode == kPrefixModeName)
      info.add_prepared_modes(v1::PREFILL_MODE_PREFIX);
  }
  return info;
}

v1::DocumentRecord ToProto(const storage::DocumentRecord& record) {
  v1::DocumentRecord out;
  out.set_tenant(record.tenant);
  *out.mutable_info() = ToDocumentInfo(record);
  out.set_segment_tokens(record.segment_tokens);
  out.set_model_fingerprint(record.model_fingerprint);
  out.set_revision(record.revision);
  for (const auto& [mode, key] : record.mode_states) {
    v1::ModeState* state = out.add_mode_states();
    state->set_mode(mode);
    *state->mutable_state_key() = ToProto(key);
  }
  return out;
}

absl::StatusOr<storage::DocumentRecord> FromProto(
    const v1::DocumentRecord& record) {
  storage::DocumentRecord out;
  out.tenant = record.tenant();
  const v1::DocumentInfo& info = record.info();
  out.document_id = info.document_id();
  out.model = info.model();
  out.model_fingerprint = record.model_fingerprint();
  out.text_sha256 = info.text_sha256();
  out.token_count = info.tokens();
  out.segment_tokens = record.segment_tokens();
  out.pinned = info.pinned();
  out.created_unix_ms = info.created_unix_ms();
  out.accessed_unix_ms = info.accessed_unix_ms();
  out.revision = record.revision();
  for (const v1::SegmentBoundary& segment : info.segments()) {
    absl::StatusOr<storage::StateKey> key = FromProto(segment.state_key());
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("segment ending at token ",
                                                     segment.end_token(), ": ",
                                                     key.status().message()));
    }
    out.segments.push_back({segment.end_token(), *key});
  }
  for (const v1::ModeState& state : record.mode_states()) {
    absl::StatusOr<storage::StateKey> key = FromProto(state.state_key());
    if (!key.ok()) return key.status();
    out.mode_states.emplace_back(state.mode(), *key);
  }
  return out;
}

}  // namespace twice::services
