// The argument checks every StateStore implementation (RocksDB, RADOS, the
// store role's client) makes the same way, so they answer
// a bad call with the same INVALID_ARGUMENT.
#ifndef TWICE_STORAGE_STATE_STORE_CHECKS_H_
#define TWICE_STORAGE_STATE_STORE_CHECKS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/state_store.h"

namespace twice::storage {

// INVALID_ARGUMENT unless recompute_tokens is non-negative, flops_per_token
// finite and non-negative, and a non-empty tenant valid (ValidateTenant).
[[nodiscard]] absl::Status ValidatePutStateOptions(
    const PutStateOptions& options);

// The page size a ListStates call asks for: `requested` in
// [1, kMaxStatePageSize], or kMaxStatePageSize for 0; INVALID_ARGUMENT
// otherwise.
[[nodiscard]] absl::StatusOr<int> StatePageSize(int requested);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_STORE_CHECKS_H_
