// PagedKvTables: the block tables of a resident executor's growing states,
// one KvBlockTable per row granularity: full attention (Llama) keeps a row
// per token, RAT a row per closed chunk of L tokens. Layers of the same
// granularity share a table (their pools use the same block indices), so
// a pass uploads one table per granularity for all its layers.
//
// Reserve covers every table at once, all or none, before a pass runs.
// Host-side bookkeeping; not thread-safe (the executor's lock guards it).
#ifndef TWICE_ENGINE_EXECUTOR_PAGED_KV_TABLES_H_
#define TWICE_ENGINE_EXECUTOR_PAGED_KV_TABLES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/kv_block_table.h"

namespace twice::engine {

class PagedKvTables {
 public:
  // Each table holds `tokens` tokens' rows for all slots together, in
  // blocks of `block_size` rows (tokens >= 0, block_size >= 1), and
  // `extra_blocks` blocks more (what the executor reserves for itself, so
  // the callers keep all `tokens`).
  PagedKvTables(int64_t tokens, int64_t block_size, int32_t slots,
                int64_t extra_blocks = 0)
      : tokens_(tokens),
        block_size_(block_size),
        slots_(slots),
        extra_blocks_(extra_blocks) {}

  // The index of the table with one row per `tokens_per_row` tokens
  // (>= 1), made on first use.
  int Register(int64_t tokens_per_row);
  const KvBlockTable& table(int index) const { return *tables_[index].table; }
  bool empty() const { return tables_.empty(); }

  // Rows for tokens[i] tokens in slots[i] (slots distinct) in every table
  // (a row per tokens_per_row whole tokens); RESOURCE_EXHAUSTED naming the
  // shortfall, with nothing taken from any table.
  [[nodiscard]] absl::Status Reserve(absl::Span<const int32_t> slots,
                                     absl::Span<const int64_t> tokens);
  // Every table keeps the slot's blocks for `tokens` tokens and gives back
  // the rest; Free keeps none.
  void Shrink(int32_t slot, int64_t tokens);
  void Free(int32_t slot) { Shrink(slot, 0); }
  // The longest block list any of the slots holds in any table (0
  // without tables).
  int64_t LongestList(absl::Span<const int32_t> slots) const;
  // The slots' rows of every table, in Register order.
  std::vector<BlockTableRows> Rows(absl::Span<const int32_t> slots) const;
  // The same on the device.
  [[nodiscard]] absl::StatusOr<std::vector<std::unique_ptr<DeviceBlockTable>>>
  Upload(ExecutorDevice& device, absl::Span<const int32_t> slots) const;

  // Free blocks of all tables, and the tokens the scarcest table still
  // has room for (0 without tables).
  int64_t free_blocks() const;
  int64_t free_tokens() const;

 private:
  struct Entry {
    int64_t tokens_per_row;
    std::unique_ptr<KvBlockTable> table;
  };

  const int64_t tokens_;
  const int64_t block_size_;
  const int32_t slots_;
  const int64_t extra_blocks_;
  std::vector<Entry> tables_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_PAGED_KV_TABLES_H_
