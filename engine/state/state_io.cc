#include "engine/state/state_io.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"

namespace twice::engine {

static_assert(std::endian::native == std::endian::little,
              "state blobs are written little-endian");

namespace {

// Upper bound on a tensor's rank in a state; real layouts use 1 to 3.
constexpr uint32_t kMaxRank = 8;

[[nodiscard]] absl::Status Truncated(std::string_view what, uint64_t need,
                                     size_t have) {
  return absl::DataLossError(
      absl::StrCat("state blob truncated: ", AbslView(what), " needs ", need,
                   " bytes, ", have, " left"));
}

}  // namespace

void StateWriter::WriteRaw(const void* data, size_t n) {
  if (out_ != nullptr) out_->append(static_cast<const char*>(data), n);
  bytes_ += static_cast<int64_t>(n);
}

void StateWriter::WriteU32(uint32_t v) { WriteRaw(&v, 4); }
void StateWriter::WriteU64(uint64_t v) { WriteRaw(&v, 8); }
void StateWriter::WriteI64(int64_t v) { WriteRaw(&v, 8); }

void StateWriter::WriteString(std::string_view s) {
  WriteU32(static_cast<uint32_t>(s.size()));
  WriteRaw(s.data(), s.size());
}

void StateWriter::WriteTensor(absl::Span<const int64_t> dims,
                              absl::Span<const float> data) {
  WriteU32(static_cast<uint32_t>(dims.size()));
  for (int64_t d : dims) WriteI64(d);
  WriteU64(data.size() * sizeof(float));
  WriteRaw(data.data(), data.size() * sizeof(float));
}

absl::StatusOr<std::string_view> StateReader::ReadBytes(uint64_t n) {
  if (n > rest_.size()) return Truncated("field", n, rest_.size());
  std::string_view out = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return out;
}

absl::StatusOr<uint32_t> StateReader::ReadU32() {
  TWICE_ASSIGN_OR_RETURN(std::string_view b, ReadBytes(4));
  uint32_t v;
  std::memcpy(&v, b.data(), 4);
  return v;
}

absl::StatusOr<uint64_t> StateReader::ReadU64() {
  TWICE_ASSIGN_OR_RETURN(std::string_view b, ReadBytes(8));
  uint64_t v;
  std::memcpy(&v, b.data(), 8);
  return v;
}

absl::StatusOr<int64_t> StateReader::ReadI64() {
  TWICE_ASSIGN_OR_RETURN(uint64_t v, ReadU64());
  return static_cast<int64_t>(v);
}

absl::StatusOr<std::string_view> StateReader::ReadString(uint32_t max_len) {
  TWICE_ASSIGN_OR_RETURN(uint32_t len, ReadU32());
  if (len > max_len) {
    return absl::DataLossError(absl::StrCat(
        "state blob: string of ", len, " bytes exceeds the limit ", max_len));
  }
  return ReadBytes(len);
}

absl::Status StateReader::ReadTensor(absl::Span<const int64_t> expected_dims,
                                     absl::Span<float> out,
                                     std::string_view what) {
  TWICE_ASSIGN_OR_RETURN(uint32_t rank, ReadU32());
  if (rank > kMaxRank || rank != expected_dims.size()) {
    return absl::DataLossError(absl::StrCat("state blob: ", AbslView(what),
                                            " has rank ", rank, ", expected ",
                                            expected_dims.size()));
  }
  for (uint32_t i = 0; i < rank; ++i) {
    TWICE_ASSIGN_OR_RETURN(int64_t d, ReadI64());
    if (d != expected_dims[i]) {
      return absl::DataLossError(
          absl::StrCat("state blob: ", AbslView(what), " dim ", i, " is ", d,
                       ", expected ", expected_dims[i], " (shape [",
                       absl::StrJoin(expected_dims, ", "), "])"));
    }
  }
  TWICE_ASSIGN_OR_RETURN(uint64_t bytes, ReadU64());
  if (bytes != out.size() * sizeof(float)) {
    return absl::DataLossError(
        absl::StrCat("state blob: ", AbslView(what), " payload is ", bytes,
                     " bytes, expected ", out.size() * sizeof(float)));
  }
  TWICE_ASSIGN_OR_RETURN(std::string_view data, ReadBytes(bytes));
  if (!data.empty()) std::memcpy(out.data(), data.data(), data.size());
  return absl::OkStatus();
}

}  // namespace twice::engine
