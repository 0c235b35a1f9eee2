// The one place a librados return code (0 or a negative errno) becomes an
// absl::Status.
//
//   NOT_FOUND           -ENOENT (no such object, pool or xattr)
//   ALREADY_EXISTS      -EEXIST (an exclusive create of an existing object)
//   ABORTED             -ECANCELED (a compare in the operation failed: the
//                       object changed since it was read)
//   UNAVAILABLE         -ETIMEDOUT (the operation may still have been
//                       applied: treat the outcome as unknown and retry
//                       idempotently), -EAGAIN, -EBUSY, -ENOTCONN,
//                       -ESHUTDOWN, -ECONNREFUSED, -EIO
//   RESOURCE_EXHAUSTED  -ENOSPC, -EDQUOT (a full pool or cluster), -E2BIG,
//                       -EFBIG (larger than the cluster's object or write
//                       size limits)
//   INVALID_ARGUMENT    -EINVAL, -ERANGE
//   PERMISSION_DENIED   -EPERM, -EACCES (cephx capabilities)
//   INTERNAL            everything else
#ifndef TWICE_STORAGE_RADOS_RADOS_STATUS_H_
#define TWICE_STORAGE_RADOS_RADOS_STATUS_H_

#include <string_view>

#include "absl/status/status.h"

namespace twice::storage {

// OK for `code` >= 0; otherwise the mapped code with the message
// "<context>: <strerror> (errno N)".
[[nodiscard]] absl::Status FromRados(int code, std::string_view context);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_STATUS_H_
