// RESOURCE_EXHAUSTED for lack of the room that releasing resident states
// makes: every state slot taken, or the KV cache's blocks all held. Marked
// (a status payload) so that ResidentModel spills an idle state and
// retries on exactly these, and not on a device out of memory, which is
// RESOURCE_EXHAUSTED too but which spilling states cannot help.
#ifndef TWICE_ENGINE_EXECUTOR_NO_ROOM_H_
#define TWICE_ENGINE_EXECUTOR_NO_ROOM_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace twice::engine {

[[nodiscard]] absl::Status NoRoomError(absl::string_view message);
bool IsNoRoom(const absl::Status& status);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_NO_ROOM_H_
