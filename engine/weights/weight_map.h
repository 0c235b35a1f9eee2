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
#include <optional>
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
  // `matrix_dtype` is the dtype GetMatrix returns (nullopt: as stored).
  [[nodiscard]] static absl::StatusOr<WeightMap> OpenDir(
      const std::string& dir, const WeightNameRule& rule,
      std::optional<DType> matrix_dtype = std::nullopt);

  bool Has(std::string_view name) const;
  // The tensor as f32 with exactly `expected` shape (norms, biases, conv
  // taps: small tensors the kernels read in f32). INVALID_ARGUMENT naming
  // the tensor, the file and expected vs actual shape otherwise.
  [[nodiscard]] absl::StatusOr<Tensor> Get(std::string_view name,
                                           const Shape& expected) const;
  // A projection or embedding matrix, in matrix_dtype(): a view of the
  // mapping when that is its stored dtype (no copy), else converted once
  // (int8: quantized per row, kernels/tensor_convert.h). Errors as Get.
  [[nodiscard]] absl::StatusOr<Tensor> GetMatrix(std::string_view name,
                                                 const Shape& expected) const;
  // A stack of matrices stored as one tensor, `expected` = [count, rows,
  // cols] (a mixture-of-experts layer's experts), as `count` matrices
  // [rows, cols] in matrix_dtype(): views of the mapping when stored in
  // that dtype, else each converted once (int8: per row of cols, as
  // GetMatrix). Errors as Get.
  [[nodiscard]] absl::StatusOr<std::vector<Tensor>> GetMatrixStack(
      std::string_view name, const Shape& expected) const;
  // OK when `name` exists with exactly `expected` shape (errors as Get),
  // without reading it.
  [[nodiscard]] absl::Status Check(std::string_view name,
                                   const Shape& expected) const;
  // The dtype GetMatrix converts to; nullopt keeps every matrix as stored.
  std::optional<DType> matrix_dtype() const { return matrix_dtype_; }
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
  std::optional<DType> matrix_dtype_;

  // The stored entry of `name` after the shape check.
  [[nodiscard]] absl::StatusOr<Stored> Find(std::string_view name,
                                            const Shape& expected) const;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_WEIGHTS_WEIGHT_MAP_H_
