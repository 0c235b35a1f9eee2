// Fuzzes the safetensors header parser (engine/weights/safetensors.h) with
// arbitrary file bytes: the 8-byte length, the JSON header, dtypes, shapes
// and data offsets. Accepted headers must describe tensors that lie inside
// the file, in the declared data section, with sizes that match the shape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/weights/safetensors.h"
#include "kernels/dtype.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<twice::engine::SafetensorsHeader> header =
      twice::engine::ParseSafetensorsHeader(bytes, "fuzz.safetensors");
  if (!header.ok()) return 0;
  const int64_t file_size = static_cast<int64_t>(size);
  if (header->data_offset < 8 || header->data_offset > file_size) {
    twice::fuzz::Die("accepted header with data offset outside the file");
  }
  for (const twice::engine::SafetensorsEntry& e : header->entries) {
    if (e.begin < 0 || e.end < e.begin ||
        e.end > file_size - header->data_offset) {
      twice::fuzz::Die("accepted tensor '" + e.name + "' outside the file");
    }
  }
  return 0;
}
