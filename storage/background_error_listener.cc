#include "storage/background_error_listener.h"

namespace twice::storage {

void BackgroundErrorListener::OnBackgroundError(
    rocksdb::BackgroundErrorReason reason, rocksdb::Status* bg_error) {
  if (bg_error == nullptr || !bg_error->IsCorruption() ||
      reason != rocksdb::BackgroundErrorReason::kCompaction) {
    return;
  }
  corruptions_->fetch_add(1);
  *bg_error = rocksdb::Status::OK();
}

}  // namespace twice::storage
