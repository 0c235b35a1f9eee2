#include "storage/rocksdb_status.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

absl::StatusCode Code(const rocksdb::Status& s) {
  return FromRocksDb(s, "ctx").code();
}

TEST(RocksDbStatusTest, OkIsOk) {
  EXPECT_OK(FromRocksDb(rocksdb::Status::OK(), "ctx"));
}

TEST(RocksDbStatusTest, RetryableIsUnavailable) {
  EXPECT_EQ(Code(rocksdb::Status::Busy()), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Code(rocksdb::Status::TimedOut()), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Code(rocksdb::Status::TryAgain()), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Code(rocksdb::Status::Incomplete()),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Code(rocksdb::Status::ShutdownInProgress()),
            absl::StatusCode::kUnavailable);
}

TEST(RocksDbStatusTest, HeldLockIsUnavailable) {
  // The two messages PosixEnv::LockFile produces.
  EXPECT_EQ(Code(rocksdb::Status::IOError("While lock file: /db/LOCK",
                                          "Resource temporarily unavailable")),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Code(rocksdb::Status::IOError(
                "lock hold by current process, acquire time 1 acquiring "
                "thread 2: /db/LOCK",
                "No locks available")),
            absl::StatusCode::kUnavailable);
}

TEST(RocksDbStatusTest, CorruptionIsDataLossNotUnavailable) {
  EXPECT_EQ(Code(rocksdb::Status::Corruption("block checksum mismatch")),
            absl::StatusCode::kDataLoss);
}

TEST(RocksDbStatusTest, OtherCodes) {
  EXPECT_EQ(Code(rocksdb::Status::NotFound()), absl::StatusCode::kNotFound);
  EXPECT_EQ(Code(rocksdb::Status::InvalidArgument()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Code(rocksdb::Status::NotSupported()),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Code(rocksdb::Status::Aborted()), absl::StatusCode::kAborted);
  EXPECT_EQ(Code(rocksdb::Status::NoSpace()),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Code(rocksdb::Status::IOError("While reading block", "EIO")),
            absl::StatusCode::kInternal);
}

TEST(RocksDbStatusTest, MessageCarriesContextAndCause) {
  const absl::Status s =
      FromRocksDb(rocksdb::Status::Corruption("bad block"), "read state ab");
  EXPECT_NE(s.message().find("read state ab"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("bad block"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace twice::storage
