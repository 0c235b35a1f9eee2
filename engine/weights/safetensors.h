// Safetensors reader: a memory-mapped file of named tensors.
//
// Format: u64 little-endian header length N | N bytes of JSON | data.
// The JSON maps tensor names to {"dtype", "shape", "data_offsets": [b, e]}
// (offsets relative to the data section) plus an optional "__metadata__"
// object of string values.
//
// Everything is validated when the file is opened: the header length against
// the file size, the JSON structure, every dtype (F32, BF16, F16 are the
// compute-convertible ones; the other safetensors dtypes are accepted for
// layout checks only), shape × dtype size == byte span, spans inside the data
// section and pairwise disjoint. Errors are INVALID_ARGUMENT naming the file
// and tensor; I/O failures are NOT_FOUND (missing file) or UNAVAILABLE.
//
// Thread safety: immutable after Open; all methods may run concurrently.
// Views returned by Read and ReadF32 stay valid while the SafetensorsFile
// lives.
#ifndef TWICE_ENGINE_WEIGHTS_SAFETENSORS_H_
#define TWICE_ENGINE_WEIGHTS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tensor/tensor.h"
#include "kernels/dtype.h"

namespace twice::engine {

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written, e.g. "BF16"
  std::optional<DType> dtype;  // set for F32 / BF16 / F16
  Shape shape;
  int64_t begin = 0;  // byte offsets within the data section
  int64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by name
  std::map<std::string, std::string> metadata;
  int64_t data_offset = 0;  // 8 + header length
};

// Parses and validates the header of a whole safetensors file held in
// `file_bytes`. `path` is only used in error messages. Never throws.
[[nodiscard]] absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    std::string_view file_bytes, std::string_view path);

class SafetensorsFile {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const {
    return header_.entries;
  }
  const std::map<std::string, std::string>& metadata() const {
    return header_.metadata;
  }
  // nullptr when absent.
  const SafetensorsEntry* Find(std::string_view name) const;
  // The stored bytes of a tensor of this file.
  absl::Span<const uint8_t> Bytes(const SafetensorsEntry& entry) const;
  // The tensor as f32: a view of the mapping when stored as 4-byte aligned
  // F32, otherwise a converted copy. INVALID_ARGUMENT for non-float dtypes.
  [[nodiscard]] absl::StatusOr<Tensor> ReadF32(
      const SafetensorsEntry& entry) const;
  // The tensor in its stored dtype: a view of the mapping (an F32 tensor
  // that is not 4-byte aligned is copied). INVALID_ARGUMENT for non-float
  // dtypes.
  [[nodiscard]] absl::StatusOr<Tensor> Read(
      const SafetensorsEntry& entry) const;
  // Drops the whole pages of this tensor's bytes from the process's
  // memory (they stay in the page cache, and a later read faults them back
  // in): for tensors a load converted and no longer reads, so a bf16 or
  // int8 load of an f32 file does not keep the f32 bytes resident.
  void ReleasePages(const SafetensorsEntry& entry) const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  uint64_t region_id_ = 0;  // the mapping's ImmutableHostRegion
  SafetensorsHeader header_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_WEIGHTS_SAFETENSORS_H_
