#include "engine/executor/no_room.h"

#include "absl/strings/cord.h"

namespace twice::engine {
namespace {

constexpr absl::string_view kNoRoomPayload = "twice.engine/no-room";

}  // namespace

absl::Status NoRoomError(absl::string_view message) {
  absl::Status s = absl::ResourceExhaustedError(message);
  s.SetPayload(kNoRoomPayload, absl::Cord("slots or KV blocks"));
  return s;
}

bool IsNoRoom(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         status.GetPayload(kNoRoomPayload).has_value();
}

}  // namespace twice::engine
