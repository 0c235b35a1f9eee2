// Conversions between storage types and their wire messages.
#ifndef TWICE_SERVICES_COMMON_PROTO_CONVERT_H_
#define TWICE_SERVICES_COMMON_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "engine/models/model.h"
#include "storage/document_record.h"
#include "storage/state_key.h"
#include "twice/v1/common.pb.h"
#include "twice/v1/store.pb.h"

namespace twice::services {

v1::StateKey ToProto(const storage::StateKey& key);
// INVALID_ARGUMENT unless the digest has exactly 32 bytes.
[[nodiscard]] absl::StatusOr<storage::StateKey> FromProto(
    const v1::StateKey& key);

// The engine's read mode of a wire PrefillMode (UNSPECIFIED = causal);
// INVALID_ARGUMENT for a value this build does not know.
[[nodiscard]] absl::StatusOr<engine::PrefillMode> FromProto(
    v1::PrefillMode mode);

// The public view of a record (no tenant, no fingerprint chain details).
v1::DocumentInfo ToDocumentInfo(const storage::DocumentRecord& record);

// The full record, as the Store API carries it.
v1::DocumentRecord ToProto(const storage::DocumentRecord& record);
[[nodiscard]] absl::StatusOr<storage::DocumentRecord> FromProto(
    const v1::DocumentRecord& record);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_PROTO_CONVERT_H_
