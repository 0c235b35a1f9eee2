// KvBlockTable: which blocks of a resident executor's paged KV caches each
// slot's sequence owns (kernels/paged_attention.h has the layout).
//
// Full-attention layers keep every token's key and value (RAT every closed
// chunk's), so their state grows with the sequence. Instead of a fixed
// region per slot (sized for the longest sequence, mostly idle) every such
// layer has one pool of `blocks` blocks of `block_size` rows (a row: one
// token's, or one chunk's, key and value), and a sequence takes blocks as
// it grows. Layers with the same rows share one table (PagedKvTables):
// block i of a sequence is the same index in each of their pools, so one
// table upload per pass serves them all. Below, "tokens" counts rows.
//
// Reserve runs before a pass touches any layer, so a pass never fails
// halfway for want of memory: RESOURCE_EXHAUSTED comes first, with no
// block taken and no state changed. Host-side bookkeeping only; not
// thread-safe (the executor's lock guards it).
#ifndef TWICE_ENGINE_EXECUTOR_KV_BLOCK_TABLE_H_
#define TWICE_ENGINE_EXECUTOR_KV_BLOCK_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::engine {

// Slots' block lists as table rows [rows, width] (block indices in
// position order, shorter lists padded with -1).
struct BlockTableRows {
  std::vector<int32_t> blocks;
  int64_t width = 1;
};

class KvBlockTable {
 public:
  // blocks >= 0, block_size >= 1, slots >= 1.
  KvBlockTable(int64_t blocks, int64_t block_size, int32_t slots);

  int64_t blocks() const { return blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Blocks that hold `tokens` tokens.
  int64_t BlocksFor(int64_t tokens) const {
    return (tokens + block_size_ - 1) / block_size_;
  }

  // Blocks the pool would have to give for Reserve(slots, tokens).
  int64_t BlocksMissing(absl::Span<const int32_t> slots,
                        absl::Span<const int64_t> tokens) const;
  // Grows each slots[i]'s blocks to hold tokens[i] tokens (slots distinct),
  // all or none: RESOURCE_EXHAUSTED saying how many blocks are missing.
  [[nodiscard]] absl::Status Reserve(absl::Span<const int32_t> slots,
                                     absl::Span<const int64_t> tokens);
  // The slot's blocks past those holding `tokens` tokens go back to the
  // pool (what a call reserved and then did not read).
  void Shrink(int32_t slot, int64_t tokens);
  // The slot's blocks go back to the pool.
  void Free(int32_t slot) { Shrink(slot, 0); }
  // The slot's blocks in position order.
  absl::Span<const int32_t> blocks_of(int32_t slot) const {
    return owned_[static_cast<size_t>(slot)];
  }
  // The slot's first `rows` rows as runs in consecutive blocks, in order:
  // rows [first, first + count) sit at pool rows [pool_row, pool_row +
  // count). INTERNAL when the slot owns too few blocks (a reservation
  // missed).
  struct Run {
    int64_t first = 0;
    int64_t pool_row = 0;
    int64_t count = 0;
  };
  [[nodiscard]] absl::StatusOr<std::vector<Run>> Runs(int32_t slot,
                                                      int64_t rows) const;
  // The slots' block lists as table rows [slots.size(), width], width the
  // longest list (at least 1).
  BlockTableRows Rows(absl::Span<const int32_t> slots) const;

 private:
  const int64_t blocks_;
  const int64_t block_size_;
  std::vector<int32_t> free_;  // a stack
  std::vector<std::vector<int32_t>> owned_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_KV_BLOCK_TABLE_H_
