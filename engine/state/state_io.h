// StateWriter / StateReader: the one serializer of recurrent state.
//
// A StateWriter either counts bytes (no output string) or appends them, so
// a state's size and its bytes come from the same code path
// (LayerState::Serialize is the only place a layer's layout is written).
// Encoding is little-endian:
//   u32 / u64 / i64   fixed width
//   string            u32 length | bytes
//   f32 tensor        u32 rank | i64 dims[rank] | u64 payload bytes | f32 data
//
// StateReader reads the same encoding from a byte range it does not own and
// validates every length against the bytes left and every tensor shape
// against the caller's expectation before copying; any mismatch is
// DATA_LOSS. Neither class is thread-safe.
#ifndef TWICE_ENGINE_STATE_STATE_IO_H_
#define TWICE_ENGINE_STATE_STATE_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::engine {

class StateWriter {
 public:
  // Counting writer: only bytes_written() advances.
  StateWriter() = default;
  // Appends to `*out` (not owned, must outlive the writer).
  explicit StateWriter(std::string* out) : out_(out) {}

  void WriteU32(uint32_t v);
  void WriteU64(uint64_t v);
  void WriteI64(int64_t v);
  void WriteString(std::string_view s);
  // `data.size()` must equal the product of `dims`.
  void WriteTensor(absl::Span<const int64_t> dims,
                   absl::Span<const float> data);

  int64_t bytes_written() const { return bytes_; }

 private:
  void WriteRaw(const void* data, size_t n);

  std::string* out_ = nullptr;
  int64_t bytes_ = 0;
};

class StateReader {
 public:
  explicit StateReader(std::string_view bytes) : rest_(bytes) {}

  [[nodiscard]] absl::StatusOr<uint32_t> ReadU32();
  [[nodiscard]] absl::StatusOr<uint64_t> ReadU64();
  [[nodiscard]] absl::StatusOr<int64_t> ReadI64();
  // A string of at most `max_len` bytes (a view into the input).
  [[nodiscard]] absl::StatusOr<std::string_view> ReadString(uint32_t max_len);
  // A tensor whose dims must equal `expected_dims`; its data is copied into
  // `out` (product of the dims). `what` names the tensor in errors.
  [[nodiscard]] absl::Status ReadTensor(absl::Span<const int64_t> expected_dims,
                                        absl::Span<float> out,
                                        std::string_view what);
  // Takes the next `n` bytes as a sub-range.
  [[nodiscard]] absl::StatusOr<std::string_view> ReadBytes(uint64_t n);

  size_t remaining() const { return rest_.size(); }

 private:
  std::string_view rest_;
};

// The bytes LayerState::Serialize-style `fn(writer)` produces when counted.
template <typename Fn>
int64_t CountBytes(const Fn& fn) {
  StateWriter counter;
  fn(counter);
  return counter.bytes_written();
}

}  // namespace twice::engine

#endif  // TWICE_ENGINE_STATE_STATE_IO_H_
