// Chunked states (chunk-KV, as RAT produces) stored as append-only blocks.
//
// A chunked state under key K is a manifest: the ordered list of its blocks.
// Each block is an ordinary state value (state_value.h) under its own key,
// BlockKey(K', j) (state_key.h), where K' is the state whose put first wrote
// the block and j its position there. A state that extends another (a
// document append) copies the base's list and adds only its new blocks, so
// the append writes the new blocks and a small manifest; a read assembles
// the blocks in order.
//
// Manifest payload, in an envelope of kind kBlockManifest (little-endian):
//
//   le64 recompute_tokens | le64 written_unix_ms | le32 block count |
//   per block: key[32] | le64 blob bytes | le64 XXH3-64 of the blob
//
// The per-block size and checksum tie a manifest to the exact bytes it was
// written with: a block replaced under the same key is caught even though
// its own envelope is intact.
#ifndef TWICE_STORAGE_BLOCK_MANIFEST_H_
#define TWICE_STORAGE_BLOCK_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/state_key.h"

namespace twice::storage {

struct BlockRef {
  StateKey key;
  int64_t bytes = 0;
  uint64_t checksum = 0;  // BlockChecksum of the block's blob
};

struct BlockManifest {
  int64_t recompute_tokens = 0;
  int64_t written_unix_ms = 0;
  std::vector<BlockRef> blocks;
};

uint64_t BlockChecksum(std::string_view blob);

std::string EncodeManifest(const BlockManifest& manifest);
// DATA_LOSS when the envelope or any field is invalid.
[[nodiscard]] absl::StatusOr<BlockManifest> DecodeManifest(
    std::string_view stored);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_BLOCK_MANIFEST_H_
