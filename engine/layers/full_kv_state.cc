#include "engine/layers/full_kv_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/state/state_io.h"
#include "kernels/status_macros.h"

namespace twice::engine {

int64_t FullKvState::ByteSize() const {
  return CountBytes([this](StateWriter& w) { Serialize(w); });
}

std::unique_ptr<LayerState> FullKvState::Clone() const {
  return std::make_unique<FullKvState>(*this);
}

void FullKvState::Append(const float* k, const float* v, int64_t tokens,
                         int64_t stride) {
  // Plain insert: the vectors grow geometrically, so a decode step does not
  // reallocate (and copy) the whole cache.
  const int64_t r = row();
  for (int64_t i = 0; i < tokens; ++i) {
    keys_.insert(keys_.end(), k + i * stride, k + i * stride + r);
    values_.insert(values_.end(), v + i * stride, v + i * stride + r);
  }
  count_ += tokens;
}

void FullKvState::Resize(int64_t tokens) {
  keys_.resize(static_cast<size_t>(tokens * row()));
  values_.resize(static_cast<size_t>(tokens * row()));
  count_ = tokens;
}

void FullKvState::Serialize(StateWriter& writer) const {
  writer.WriteI64(count_);
  writer.WriteTensor({count_, kv_heads_, head_dim_}, keys_);
  writer.WriteTensor({count_, kv_heads_, head_dim_}, values_);
}

absl::Status FullKvState::Deserialize(StateReader& reader) {
  TWICE_ASSIGN_OR_RETURN(int64_t count, reader.ReadI64());
  // Two tensors of count rows must fit in what is left; checked before any
  // allocation, and in a form that cannot overflow.
  const uint64_t row_bytes = static_cast<uint64_t>(row()) * sizeof(float);
  if (count < 0 ||
      static_cast<uint64_t>(count) > reader.remaining() / (2 * row_bytes)) {
    return absl::DataLossError(absl::StrCat("full_kv token count ", count,
                                            " does not fit the ",
                                            reader.remaining(), " bytes left"));
  }
  std::vector<float> keys(count * row()), values(count * row());
  TWICE_RETURN_IF_ERROR(reader.ReadTensor(
      {count, kv_heads_, head_dim_}, absl::MakeSpan(keys), "full_kv keys"));
  TWICE_RETURN_IF_ERROR(reader.ReadTensor(
      {count, kv_heads_, head_dim_}, absl::MakeSpan(values), "full_kv values"));
  count_ = count;
  keys_ = std::move(keys);
  values_ = std::move(values);
  return absl::OkStatus();
}

std::string FullKvState::RowBytes(int64_t begin, int64_t end) const {
  const size_t r = static_cast<size_t>(row());
  const size_t half = r * sizeof(float);
  std::string out(static_cast<size_t>(end - begin) * 2 * half, '\0');
  // Hosts are little-endian (as StateWriter assumes).
  char* at = out.data();
  for (int64_t t = begin; t < end; ++t) {
    std::memcpy(at, keys_.data() + t * r, half);
    std::memcpy(at + half, values_.data() + t * r, half);
    at += 2 * half;
  }
  return out;
}

absl::Status FullKvState::AppendRows(std::string_view bytes) {
  const size_t row_size = static_cast<size_t>(row_bytes());
  if (bytes.size() % row_size != 0) {
    return absl::DataLossError(absl::StrCat("full_kv block of ", bytes.size(),
                                            " bytes is not a whole number of ",
                                            row_size, "-byte token rows"));
  }
  const int64_t rows = static_cast<int64_t>(bytes.size() / row_size);
  const size_t r = static_cast<size_t>(row());
  const size_t half = r * sizeof(float);
  const size_t old = keys_.size();
  keys_.resize(old + rows * r);
  values_.resize(old + rows * r);
  for (int64_t t = 0; t < rows; ++t) {
    const char* from = bytes.data() + t * row_size;
    std::memcpy(keys_.data() + old + t * r, from, half);
    std::memcpy(values_.data() + old + t * r, from + half, half);
  }
  count_ += rows;
  return absl::OkStatus();
}

void FullKvState::SerializeHead(StateWriter& writer) const {
  writer.WriteI64(count_);
}

absl::Status FullKvState::DeserializeHead(StateReader& reader) {
  TWICE_ASSIGN_OR_RETURN(int64_t count, reader.ReadI64());
  if (count != count_) {
    return absl::DataLossError(absl::StrCat("full_kv head: token count ", count,
                                            " but ", count_,
                                            " token rows were stored"));
  }
  return absl::OkStatus();
}

}  // namespace twice::engine
