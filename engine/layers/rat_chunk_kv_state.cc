#include "engine/layers/rat_chunk_kv_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/state/state_io.h"
#include "kernels/status_macros.h"

namespace twice::engine {

int64_t RatChunkKvState::ByteSize() const {
  return CountBytes([this](StateWriter& w) { Serialize(w); });
}

std::unique_ptr<LayerState> RatChunkKvState::Clone() const {
  return std::make_unique<RatChunkKvState>(*this);
}

void RatChunkKvState::CloseChunk(const float* key, const float* value) {
  closed_.insert(closed_.end(), key, key + dim_);
  closed_.insert(closed_.end(), value, value + dim_);
}

void RatChunkKvState::Serialize(StateWriter& writer) const {
  writer.WriteI64(count_);
  writer.WriteTensor({closed_chunks(), 2, dim_}, closed_);
  writer.WriteTensor({2, dim_}, open_);
}

absl::Status RatChunkKvState::Deserialize(StateReader& reader) {
  TWICE_ASSIGN_OR_RETURN(int64_t count, reader.ReadI64());
  const uint64_t row_bytes = 2 * static_cast<uint64_t>(dim_) * sizeof(float);
  if (count < 0 || static_cast<uint64_t>(count / chunk_size_) >
                       reader.remaining() / row_bytes) {
    return absl::DataLossError(absl::StrCat("rat_chunk_kv token count ", count,
                                            " does not fit the ",
                                            reader.remaining(), " bytes left"));
  }
  const int64_t chunks = count / chunk_size_;
  std::vector<float> closed(chunks * 2 * dim_), open(2 * dim_);
  TWICE_RETURN_IF_ERROR(reader.ReadTensor(
      {chunks, 2, dim_}, absl::MakeSpan(closed), "rat_chunk_kv closed"));
  TWICE_RETURN_IF_ERROR(
      reader.ReadTensor({2, dim_}, absl::MakeSpan(open), "rat_chunk_kv open"));
  count_ = count;
  closed_ = std::move(closed);
  open_ = std::move(open);
  return absl::OkStatus();
}

void RatChunkKvState::SerializeHead(StateWriter& writer) const {
  writer.WriteI64(count_);
  writer.WriteTensor({2, dim_}, open_);
}

absl::Status RatChunkKvState::DeserializeHead(StateReader& reader) {
  TWICE_ASSIGN_OR_RETURN(int64_t count, reader.ReadI64());
  if (count < 0 || count / chunk_size_ != closed_chunks()) {
    return absl::DataLossError(
        absl::StrCat("rat_chunk_kv head: token count ", count, " does not fit ",
                     closed_chunks(), " closed chunks of ", chunk_size_));
  }
  std::vector<float> open(2 * dim_);
  TWICE_RETURN_IF_ERROR(
      reader.ReadTensor({2, dim_}, absl::MakeSpan(open), "rat_chunk_kv open"));
  count_ = count;
  open_ = std::move(open);
  return absl::OkStatus();
}

std::string RatChunkKvState::ClosedRowBytes(int64_t begin, int64_t end) const {
  const int64_t row = 2 * dim_;
  std::string out(static_cast<size_t>((end - begin) * row) * sizeof(float),
                  '\0');
  // Hosts are little-endian (as StateWriter assumes).
  std::memcpy(out.data(), closed_.data() + begin * row, out.size());
  return out;
}

absl::Status RatChunkKvState::AppendClosedRows(std::string_view bytes) {
  const size_t row_bytes = 2 * static_cast<size_t>(dim_) * sizeof(float);
  if (bytes.size() % row_bytes != 0) {
    return absl::DataLossError(absl::StrCat(
        "rat_chunk_kv block of ", bytes.size(),
        " bytes is not a whole number of ", row_bytes, "-byte chunk rows"));
  }
  const size_t old = closed_.size();
  closed_.resize(old + bytes.size() / sizeof(float));
  std::memcpy(closed_.data() + old, bytes.data(), bytes.size());
  return absl::OkStatus();
}

}  // namespace twice::engine
