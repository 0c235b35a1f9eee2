// WeightMap: the tensors of a model directory by canonical name, across one
// `model.safetensors` or the shards named by `model.safetensors.index.json`.
//
// Names are canonicalised by the caller's rule (e.g. Based strips a leading
// "model." and renames legacy "conv1"); two stored names with the same
// canonical name are an error. Tensors stay memory mapped; the map owns the
// files, so views it returns live as long as the map (or any copy of it).
//
// Thread safety: immutable after OpenDir; all methods may run concurrently.
#ifndef TWICE_ENGINE_WEIGHTS_WEIGHT_MAP_H_
#define TWICE_ENGINE_WEIGHTS_WEIGHT_MAP_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tensor/tensor.h"
#include "engine/weights/safetensors.h"

namespace twice::engine {

// The "weight_map" of a model.safetensors.index.json (`json`, read from
// `path`, which errors name): stored tensor name -> shard file name.
// INVALID_ARGUMENT for anything but a JSON object whose "weight_map" maps
// names to plain file names of the model directory (no '/', "." or "..").
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>>
ParseWeightIndex(std::string_view json, std::string_view path);

// Returns the canonical name of a stored tensor, or "" to ignore the tensor.
using WeightNameRule = std::function<std::string(std::string_view)>;

class WeightMap {
 public:
  struct Stored {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };

  // Opens `dir`/model.safetensors.index.json when present (its "weight_map"
  // names each tensor's shard, a file in `dir`), else `dir`/model.safetensors.
  [[nodiscard]] static absl::StatusOr<WeightMap> OpenDir(
      const std::string& dir, const WeightNameRule& rule);

  bool Has(std::string_view name) const;
  // The tensor as f32 with exactly `expected` shape. INVALID_ARGUMENT naming
  // the tensor, the file and expected vs actual shape otherwise.
  [[nodiscard]] absl::StatusOr<Tensor> Get(std::string_view name,
                                           const Shape& expected) const;
  // Canonical name -> stored tensor, in name order.
  const std::map<std::string, Stored, std::less<>>& tensors() const {
    return tensors_;
  }
  // Where the weights came from, for messages.
  const std::string& source() const { return source_; }

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, Stored, std::less<>> tensors_;
  std::string source_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_WEIGHTS_WEIGHT_MAP_H_
