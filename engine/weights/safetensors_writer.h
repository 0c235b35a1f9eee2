// Safetensors writer: stores F32, BF16 and F16 tensors, each in its own
// dtype (init-model, tests, conversions). The header lists tensors in name
// order, data follows in the same order, and the header is space-padded so
// the data section starts 8-byte aligned (then every tensor of an all-f32
// or all-16-bit file can be used in place after mapping).
#ifndef TWICE_ENGINE_WEIGHTS_SAFETENSORS_WRITER_H_
#define TWICE_ENGINE_WEIGHTS_SAFETENSORS_WRITER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tensor/tensor.h"

namespace twice::engine {

struct NamedTensor {
  std::string name;
  const Tensor* tensor = nullptr;  // not owned; must outlive the call
};

// Writes `tensors` (unique names) to `path`, through a temporary file
// renamed into place so a reader never sees a partial file. Errors:
// INVALID_ARGUMENT (duplicate or empty name; an I8 tensor, whose scales
// the format cannot hold; a tensor not in host memory), UNAVAILABLE (I/O).
[[nodiscard]] absl::Status WriteSafetensors(
    const std::string& path, std::vector<NamedTensor> tensors,
    const std::map<std::string, std::string>& metadata = {});

// The bytes WriteSafetensors would write, for tests that craft files.
[[nodiscard]] absl::StatusOr<std::string> SerializeSafetensors(
    std::vector<NamedTensor> tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace twice::engine

#endif  // TWICE_ENGINE_WEIGHTS_SAFETENSORS_WRITER_H_
