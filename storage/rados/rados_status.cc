#include "storage/rados/rados_status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace twice::storage {
namespace {

absl::StatusCode CodeOf(int error) {
  switch (error) {
    case ENOENT:
      return absl::StatusCode::kNotFound;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case ECANCELED:
      return absl::StatusCode::kAborted;
    case ETIMEDOUT:
    case EAGAIN:
    case EBUSY:
    case ENOTCONN:
    case ESHUTDOWN:
    case ECONNREFUSED:
    case EIO:
      return absl::StatusCode::kUnavailable;
    case ENOSPC:
    case EDQUOT:
    case E2BIG:
    case EFBIG:
      return absl::StatusCode::kResourceExhausted;
    case EINVAL:
    case ERANGE:
      return absl::StatusCode::kInvalidArgument;
    case EPERM:
    case EACCES:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status FromRados(int code, std::string_view context) {
  if (code >= 0) return absl::OkStatus();
  const int error = -code;
  std::string what = std::strerror(error);
  if (error == ETIMEDOUT) {
    what += "; the operation may still have been applied";
  }
  return absl::Status(
      CodeOf(error),
      absl::StrCat(absl::string_view(context.data(), context.size()), ": ",
                   what, " (errno ", error, ")"));
}

}  // namespace twice::storage
