// FullKvState: the memory of a softmax attention layer with a full KV cache
// (the Llama baseline) — the post-rotary keys and the values of EVERY token
// read so far. Unlike the fixed-size recurrent states its size grows with
// the sequence: 2 · T · H_kv · hd floats per layer.
//
//   k, v [T, H_kv, hd]   row p is the token at absolute position p
//
// Serialized (kind "full_kv"): i64 T, then f32 tensors k [T, H_kv, hd] and
// v [T, H_kv, hd]. Deserialize checks T against the bytes left BEFORE
// allocating, so a corrupt length is DATA_LOSS, not a huge allocation.
//
// A cached token never changes, so the cache is also a BlockRowsState
// (state_blocks.h): one row per token, its key then its value (8·H_kv·hd
// bytes), and a head of just T. A segment or an appended question then
// stores only its own tokens' rows, not the whole cache again.
#ifndef TWICE_ENGINE_LAYERS_FULL_KV_STATE_H_
#define TWICE_ENGINE_LAYERS_FULL_KV_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/state/block_rows_state.h"
#include "engine/state/layer_state.h"

namespace twice::engine {

class FullKvState final : public LayerState, public BlockRowsState {
 public:
  static constexpr std::string_view kKind = "full_kv";

  FullKvState(int64_t kv_heads, int64_t head_dim)
      : kv_heads_(kv_heads), head_dim_(head_dim) {}

  std::string_view kind() const override { return kKind; }
  int64_t ByteSize() const override;
  std::unique_ptr<LayerState> Clone() const override;
  void Serialize(StateWriter& writer) const override;
  [[nodiscard]] absl::Status Deserialize(StateReader& reader) override;

  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t row() const { return kv_heads_ * head_dim_; }
  int64_t count() const { return count_; }
  // Floats the cache holds: 2 · T · H_kv · hd (the formula of design §3).
  int64_t elements() const { return 2 * count_ * row(); }
  absl::Span<const float> keys() const { return keys_; }
  absl::Span<const float> values() const { return values_; }
  // Holds `tokens` rows (new rows zero, the first kept): a copy from a
  // device then fills keys and values in place.
  void Resize(int64_t tokens);
  absl::Span<float> mutable_keys() { return absl::MakeSpan(keys_); }
  absl::Span<float> mutable_values() { return absl::MakeSpan(values_); }
  // Appends `tokens` rows of keys / values ([tokens, H_kv, hd] each, row
  // stride `stride`).
  void Append(const float* k, const float* v, int64_t tokens, int64_t stride);

  // BlockRowsState: a row is one token's key and value.
  int64_t row_count() const override { return count_; }
  int64_t row_bytes() const override {
    return 2 * row() * static_cast<int64_t>(sizeof(float));
  }
  std::string RowBytes(int64_t begin, int64_t end) const override;
  // DATA_LOSS when `bytes` is not a whole number of rows.
  [[nodiscard]] absl::Status AppendRows(std::string_view bytes) override;
  void SerializeHead(StateWriter& writer) const override;
  // DATA_LOSS unless the head's T equals the rows held.
  [[nodiscard]] absl::Status DeserializeHead(StateReader& reader) override;

 private:
  int64_t kv_heads_;
  int64_t head_dim_;
  int64_t count_ = 0;
  std::vector<float> keys_;    // [T, H_kv, hd]
  std::vector<float> values_;  // [T, H_kv, hd]
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_LAYERS_FULL_KV_STATE_H_
