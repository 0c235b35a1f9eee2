// RatChunkKvState: the memory of a RAT layer (design §3 "chunk-KV") — the
// final key and value of every closed chunk plus the running key and value
// of the open chunk.
//
//   closed [C, 2, D]   C = ⌊T / L⌋; row c = k̄_c (post-RoPE, rotated by c)
//                      | v̄_c, the EMA values at the chunk's last token
//   open   [2, D]      pre-RoPE running k̄ | v̄ of the open chunk (the last
//                      token's EMA; reset by the next chunk's first token)
//   count              T, tokens read
// Floats held: 2·D·⌊T/L⌋ + 2·D. Upstream's RATCache counts the open chunk
// twice (a post-RoPE slot in its chunk cache besides the pre-RoPE running
// vectors): 2·D·⌈T/L⌉ + 2·D; the two agree whenever L divides T, and this
// state never holds more.
//
// Serialized (kind "rat_chunk_kv"): i64 count | f32 tensor closed
// [C, 2, D] | f32 tensor open [2, D]. Block-appendable: a closed chunk's row
// never changes once written and every row has the same size (8·D bytes),
// so the bytes of chunks [c0, C) are ClosedRowBytes(c0, C) and a store can
// keep them as append-only blocks (storage PutStateBlocks) while only the
// small head (count, open) is rewritten per update; AppendClosedRows reads
// such blocks back. As a BlockRowsState (engine/state/block_rows_state.h)
// the rows are the closed chunks and the head is: i64 count | f32 tensor
// open [2, D].
#ifndef TWICE_ENGINE_LAYERS_RAT_CHUNK_KV_STATE_H_
#define TWICE_ENGINE_LAYERS_RAT_CHUNK_KV_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/state/block_rows_state.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class RatChunkKvState final : public LayerState, public BlockRowsState {
 public:
  static constexpr std::string_view kKind = "rat_chunk_kv";

  RatChunkKvState(int64_t chunk_size, int64_t dim)
      : chunk_size_(chunk_size), dim_(dim), open_(2 * dim, 0.0f) {}

  std::string_view kind() const override { return kKind; }
  int64_t ByteSize() const override;
  std::unique_ptr<LayerState> Clone() const override;
  void Serialize(StateWriter& writer) const override;
  [[nodiscard]] absl::Status Deserialize(StateReader& reader) override;

  int64_t chunk_size() const { return chunk_size_; }
  int64_t dim() const { return dim_; }
  int64_t count() const { return count_; }
  void set_count(int64_t n) { count_ = n; }
  int64_t closed_chunks() const {
    return static_cast<int64_t>(closed_.size()) / (2 * dim_);
  }
  // Floats held: 2·D·⌊T/L⌋ + 2·D.
  int64_t elements() const {
    return static_cast<int64_t>(closed_.size() + open_.size());
  }
  absl::Span<const float> closed() const { return closed_; }
  float* open_key() { return open_.data(); }
  float* open_value() { return open_.data() + dim_; }
  // For a copy from a device: `chunks` closed rows (new ones zero) and
  // both arrays writable in place.
  void ResizeClosed(int64_t chunks) {
    closed_.resize(static_cast<size_t>(chunks * 2 * dim_));
  }
  absl::Span<float> mutable_closed() { return absl::MakeSpan(closed_); }
  absl::Span<float> mutable_open() { return absl::MakeSpan(open_); }
  absl::Span<const float> open() const { return open_; }
  // Closes a chunk: appends its post-RoPE key and its value ([D] each).
  void CloseChunk(const float* key, const float* value);

  // Raw little-endian f32 bytes of closed rows [begin, end).
  std::string ClosedRowBytes(int64_t begin, int64_t end) const;
  // Appends whole closed rows given as ClosedRowBytes produced them;
  // DATA_LOSS when the size is not a whole number of rows.
  [[nodiscard]] absl::Status AppendClosedRows(std::string_view bytes);

  // BlockRowsState: a row is a closed chunk (8·D bytes).
  int64_t row_count() const override { return closed_chunks(); }
  int64_t row_bytes() const override {
    return 2 * dim_ * static_cast<int64_t>(sizeof(float));
  }
  std::string RowBytes(int64_t begin, int64_t end) const override {
    return ClosedRowBytes(begin, end);
  }
  [[nodiscard]] absl::Status AppendRows(std::string_view bytes) override {
    return AppendClosedRows(bytes);
  }
  void SerializeHead(StateWriter& writer) const override;
  // DATA_LOSS unless ⌊count / L⌋ equals the closed chunks held.
  [[nodiscard]] absl::Status DeserializeHead(StateReader& reader) override;

 private:
  int64_t chunk_size_;
  int64_t dim_;
  int64_t count_ = 0;
  std::vector<float> closed_;  // [C, 2, D]
  std::vector<float> open_;    // [2, D]
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_RAT_CHUNK_KV_STATE_H_
