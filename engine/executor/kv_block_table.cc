#include "engine/executor/kv_block_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/executor/no_room.h"

namespace twice::engine {

KvBlockTable::KvBlockTable(int64_t blocks, int64_t block_size, int32_t slots)
    : blocks_(blocks),
      block_size_(block_size),
      owned_(static_cast<size_t>(slots)) {
  free_.reserve(static_cast<size_t>(blocks));
  for (int64_t b = blocks - 1; b >= 0; --b) {
    free_.push_back(static_cast<int32_t>(b));
  }
}

int64_t KvBlockTable::BlocksMissing(absl::Span<const int32_t> slots,
                                    absl::Span<const int64_t> tokens) const {
  int64_t missing = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    missing += std::max<int64_t>(
        0,
        BlocksFor(tokens[i]) -
            static_cast<int64_t>(owned_[static_cast<size_t>(slots[i])].size()));
  }
  return missing;
}

absl::Status KvBlockTable::Reserve(absl::Span<const int32_t> slots,
                                   absl::Span<const int64_t> tokens) {
  const int64_t missing = BlocksMissing(slots, tokens);
  if (missing > free_blocks()) {
    return NoRoomError(absl::StrCat(
        "the KV cache has ", free_blocks(), " free blocks of ", block_size_,
        " rows and this call needs ", missing,
        "; release sequences or give the executor more KV cache tokens"));
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    std::vector<int32_t>& owned = owned_[static_cast<size_t>(slots[i])];
    while (static_cast<int64_t>(owned.size()) < BlocksFor(tokens[i])) {
      owned.push_back(free_.back());
      free_.pop_back();
    }
  }
  return absl::OkStatus();
}

void KvBlockTable::Shrink(int32_t slot, int64_t tokens) {
  std::vector<int32_t>& owned = owned_[static_cast<size_t>(slot)];
  const size_t keep = static_cast<size_t>(BlocksFor(tokens));
  // Pushed back last block first, so a slot that grows again at once gets
  // its blocks back in the same order.
  while (owned.size() > keep) {
    free_.push_back(owned.back());
    owned.pop_back();
  }
}

absl::StatusOr<std::vector<KvBlockTable::Run>> KvBlockTable::Runs(
    int32_t slot, int64_t rows) const {
  const std::vector<int32_t>& blocks = owned_[static_cast<size_t>(slot)];
  if (BlocksFor(rows) > static_cast<int64_t>(blocks.size())) {
    return absl::InternalError(
        absl::StrCat("slot ", slot, " owns ", blocks.size(),
                     " blocks, too few for ", rows, " rows"));
  }
  std::vector<Run> runs;
  const int64_t bs = block_size_;
  int64_t b = 0;
  while (b * bs < rows) {
    int64_t run = 1;
    while ((b + run) * bs < rows && blocks[b + run] == blocks[b] + run) ++run;
    const int64_t first = b * bs;
    runs.push_back(
        {first, int64_t{blocks[b]} * bs, std::min(run * bs, rows - first)});
    b += run;
  }
  return runs;
}

BlockTableRows KvBlockTable::Rows(absl::Span<const int32_t> slots) const {
  BlockTableRows rows;
  for (int32_t s : slots) {
    rows.width =
        std::max(rows.width,
                 static_cast<int64_t>(owned_[static_cast<size_t>(s)].size()));
  }
  rows.blocks.assign(slots.size() * static_cast<size_t>(rows.width), -1);
  for (size_t r = 0; r < slots.size(); ++r) {
    const std::vector<int32_t>& owned = owned_[static_cast<size_t>(slots[r])];
    std::copy(owned.begin(), owned.end(),
              rows.blocks.begin() + static_cast<int64_t>(r) * rows.width);
  }
  return rows;
}

}  // namespace twice::engine
