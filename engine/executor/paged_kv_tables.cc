#include "engine/executor/paged_kv_tables.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/executor/no_room.h"
#include "kernels/status_macros.h"

namespace twice::engine {

int PagedKvTables::Register(int64_t tokens_per_row) {
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (tables_[i].tokens_per_row == tokens_per_row) return static_cast<int>(i);
  }
  const int64_t rows = (tokens_ + tokens_per_row - 1) / tokens_per_row;
  tables_.push_back({tokens_per_row,
                     std::make_unique<KvBlockTable>(
                         (rows + block_size_ - 1) / block_size_ + extra_blocks_,
                         block_size_, slots_)});
  return static_cast<int>(tables_.size()) - 1;
}

absl::Status PagedKvTables::Reserve(absl::Span<const int32_t> slots,
                                    absl::Span<const int64_t> tokens) {
  std::vector<std::vector<int64_t>> rows(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    for (int64_t n : tokens) rows[t].push_back(n / tables_[t].tokens_per_row);
    const int64_t missing = tables_[t].table->BlocksMissing(slots, rows[t]);
    if (missing > tables_[t].table->free_blocks()) {
      return NoRoomError(absl::StrCat(
          "the KV cache has ", tables_[t].table->free_blocks(),
          " free blocks and this call needs ", missing,
          " more; release sequences or give the executor more KV cache "
          "tokens"));
    }
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    TWICE_RETURN_IF_ERROR(tables_[t].table->Reserve(slots, rows[t]));
  }
  return absl::OkStatus();
}

void PagedKvTables::Shrink(int32_t slot, int64_t tokens) {
  for (Entry& e : tables_) e.table->Shrink(slot, tokens / e.tokens_per_row);
}

int64_t PagedKvTables::LongestList(absl::Span<const int32_t> slots) const {
  int64_t longest = 0;
  for (const Entry& e : tables_) {
    for (const int32_t slot : slots) {
      longest = std::max(longest,
                         static_cast<int64_t>(e.table->blocks_of(slot).size()));
    }
  }
  return longest;
}

std::vector<BlockTableRows> PagedKvTables::Rows(
    absl::Span<const int32_t> slots) const {
  std::vector<BlockTableRows> out;
  for (const Entry& e : tables_) out.push_back(e.table->Rows(slots));
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<DeviceBlockTable>>>
PagedKvTables::Upload(ExecutorDevice& device,
                      absl::Span<const int32_t> slots) const {
  std::vector<std::unique_ptr<DeviceBlockTable>> out;
  for (const BlockTableRows& rows : Rows(slots)) {
    TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBlockTable> table,
                           device.UploadBlockTable(rows.blocks, rows.width));
    out.push_back(std::move(table));
  }
  return out;
}

int64_t PagedKvTables::free_blocks() const {
  int64_t n = 0;
  for (const Entry& e : tables_) n += e.table->free_blocks();
  return n;
}

int64_t PagedKvTables::free_tokens() const {
  if (tables_.empty()) return 0;
  int64_t n = std::numeric_limits<int64_t>::max();
  for (const Entry& e : tables_) {
    n = std::min(
        n, e.table->free_blocks() * e.table->block_size() * e.tokens_per_row);
  }
  return n;
}

}  // namespace twice::engine
