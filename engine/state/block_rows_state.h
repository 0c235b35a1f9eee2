// BlockRowsState: a LayerState that grows by append-only rows (RAT's closed
// chunks) plus a small head that is rewritten on every update. Such a layer
// can be stored as blocks (state_blocks.h): the rows a stored base state
// already holds are never written again, only the rows added since and the
// head. A layer opts in by implementing this interface beside LayerState;
// the block codec never looks inside a layer.
//
// Contract: rows [0, row_count()) never change once the layer holds them,
// every row has row_bytes() bytes, and Serialize(whole) carries the same
// information as RowBytes(0, row_count()) + SerializeHead. Not thread-safe.
#ifndef TWICE_ENGINE_STATE_BLOCK_ROWS_STATE_H_
#define TWICE_ENGINE_STATE_BLOCK_ROWS_STATE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace twice::engine {

class StateWriter;
class StateReader;

class BlockRowsState {
 public:
  virtual ~BlockRowsState() = default;

  // Rows held.
  virtual int64_t row_count() const = 0;
  // Bytes of one row (> 0, the same for every row of the layer).
  virtual int64_t row_bytes() const = 0;
  // Raw bytes of rows [begin, end), 0 <= begin <= end <= row_count().
  virtual std::string RowBytes(int64_t begin, int64_t end) const = 0;
  // Appends whole rows as RowBytes produced them; DATA_LOSS when `bytes` is
  // not a whole number of rows.
  [[nodiscard]] virtual absl::Status AppendRows(std::string_view bytes) = 0;
  // Writes everything but the rows.
  virtual void SerializeHead(StateWriter& writer) const = 0;
  // Reads a head written by SerializeHead into a layer that already holds
  // its rows; DATA_LOSS when the head does not agree with the rows held or
  // with the layer's shapes.
  [[nodiscard]] virtual absl::Status DeserializeHead(StateReader& reader) = 0;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_BLOCK_ROWS_STATE_H_
