// A store directory opened directly with RocksDB, as a tool would, to reach
// under the store (flip bytes, drop entries). Only while the store is
// closed: RocksDB lets one process open a directory once.
#ifndef TWICE_TESTS_STORAGE_RAW_DB_H_
#define TWICE_TESTS_STORAGE_RAW_DB_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "storage/rocksdb_state_store.h"
#include "storage/rocksdb_status.h"
#include "tests/testing/status_matchers.h"

namespace twice::testing {

// ASSERT_OK and EXPECT_OK for the raw RocksDB calls below.
inline absl::Status StatusOf(const rocksdb::Status& status) {
  return storage::FromRocksDb(status, "raw RocksDB call");
}

}  // namespace twice::testing

namespace twice::storage::test_util {

class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    std::vector<std::string> names;
    EXPECT_TRUE(
        rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names)
            .ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const std::string& name : names) {
      rocksdb::ColumnFamilyOptions options;
      if (name == kStatesFamily) {
        options.enable_blob_files = true;
        options.min_blob_size = kStateMinBlobBytes;
      }
      families.emplace_back(name, options);
    }
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s =
        rocksdb::DB::Open(rocksdb::DBOptions(), path, families, &handles_, &db);
    EXPECT_OK(s);
    db_.reset(db);
    for (size_t i = 0; i < handles_.size(); ++i)
      by_name_[names[i]] = handles_[i];
  }
  ~RawDb() {
    if (db_ == nullptr) return;
    for (auto* handle : handles_) {
      EXPECT_OK(db_->DestroyColumnFamilyHandle(handle));
    }
    EXPECT_OK(db_->Close());
  }

  rocksdb::DB* db() { return db_.get(); }
  rocksdb::ColumnFamilyHandle* family(const std::string& name) {
    return by_name_.at(name);
  }
  rocksdb::Status Get(const std::string& family_name, std::string_view key,
                      std::string* value) {
    return db_->Get(rocksdb::ReadOptions(), family(family_name),
                    rocksdb::Slice(key.data(), key.size()), value);
  }
  rocksdb::Status Put(const std::string& family_name, std::string_view key,
                      std::string_view value) {
    return db_->Put(rocksdb::WriteOptions(), family(family_name),
                    rocksdb::Slice(key.data(), key.size()),
                    rocksdb::Slice(value.data(), value.size()));
  }
  rocksdb::Status Delete(const std::string& family_name, std::string_view key) {
    return db_->Delete(rocksdb::WriteOptions(), family(family_name),
                       rocksdb::Slice(key.data(), key.size()));
  }
  // Keys of a family that holds no blob files (not states).
  std::vector<std::string> Keys(const std::string& family_name) {
    std::vector<std::string> keys;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), family(family_name)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      keys.push_back(it->key().ToString());
    }
    return keys;
  }
  void DropFamily(const std::string& name) {
    rocksdb::ColumnFamilyHandle* handle = family(name);
    EXPECT_OK(db_->DropColumnFamily(handle));
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name_;
};

}  // namespace twice::storage::test_util

#endif  // TWICE_TESTS_STORAGE_RAW_DB_H_
