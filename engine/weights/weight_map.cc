#include "engine/weights/weight_map.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_convert.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool FileExists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

// Shard file names from the index file at `path`, by stored tensor name.
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> ReadIndex(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseWeightIndex(buf.str(), path);
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseWeightIndex(
    std::string_view json, std::string_view path) {
  try {
    const nlohmann::json root =
        nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded() || !root.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(path), ": not a JSON object"));
    }
    const auto map = root.find("weight_map");
    if (map == root.end() || !map->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(path), ": missing object \"weight_map\""));
    }
    std::map<std::string, std::string> shards;
    for (const auto& [name, file] : map->items()) {
      if (!file.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            AbslView(path), ": shard of '", name, "' is not a string"));
      }
      std::string shard = file.get<std::string>();
      // Shards must sit in the model directory itself.
      if (shard.empty() || shard.find('/') != std::string::npos ||
          shard == "." || shard == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            AbslView(path), ": invalid shard file name '", shard, "'"));
      }
      shards[name] = std::move(shard);
    }
    return shards;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(path), ": malformed: ", e.what()));
  }
}

absl::StatusOr<WeightMap> WeightMap::OpenDir(
    const std::string& dir, const WeightNameRule& rule,
    std::optional<DType> matrix_dtype) {
  WeightMap map;
  map.matrix_dtype_ = matrix_dtype;
  // Stored name -> shard file; nullopt-like empty map for the single file.
  std::map<std::string, std::string> shard_of;
  const std::string index_path = absl::StrCat(dir, "/", kIndexFile);
  std::vector<std::string> shard_names;
  if (FileExists(index_path)) {
    try {
      TWICE_ASSIGN_OR_RETURN(shard_of, ReadIndex(index_path));
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": malformed: ", e.what()));
    }
    for (const auto& [name, shard] : shard_of) {
      if (std::find(shard_names.begin(), shard_names.end(), shard) ==
          shard_names.end()) {
        shard_names.push_back(shard);
      }
    }
    map.source_ = index_path;
  } else {
    shard_names.push_back(kSingleFile);
    map.source_ = absl::StrCat(dir, "/", kSingleFile);
  }

  for (const std::string& shard : shard_names) {
    TWICE_ASSIGN_OR_RETURN(
        std::unique_ptr<SafetensorsFile> opened,
        SafetensorsFile::Open(absl::StrCat(dir, "/", shard)));
    std::shared_ptr<const SafetensorsFile> file = std::move(opened);
    for (const SafetensorsEntry& entry : file->entries()) {
      // With an index, a tensor counts only in the shard the index names.
      if (!shard_of.empty()) {
        auto it = shard_of.find(entry.name);
        if (it == shard_of.end() || it->second != shard) continue;
      }
      std::string canonical = rule ? rule(entry.name) : entry.name;
      if (canonical.empty()) continue;
      Stored stored{file.get(), &entry};
      auto [it, inserted] = map.tensors_.emplace(canonical, stored);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            file->path(), ": tensor '", entry.name, "' duplicates '",
            it->second.entry->name, "' in ", it->second.file->path(),
            " (both are '", canonical, "')"));
      }
    }
    map.files_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : shard_of) {
    bool found = false;
    for (const auto& file : map.files_) {
      if (file->path() == absl::StrCat(dir, "/", shard) &&
          file->Find(name) != nullptr) {
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat(
          index_path, ": tensor '", name, "' is not in its shard ", shard));
    }
  }
  return map;
}

bool WeightMap::Has(std::string_view name) const {
  return tensors_.find(name) != tensors_.end();
}

absl::StatusOr<WeightMap::Stored> WeightMap::Find(std::string_view name,
                                                  const Shape& expected) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing tensor '", AbslView(name), "' (expected shape ",
                     ShapeToString(expected), ") in ", source_));
  }
  const Stored& s = it->second;
  if (s.entry->shape != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", AbslView(name), "' in ", s.file->path(), " has shape ",
        ShapeToString(s.entry->shape), ", expected ", ShapeToString(expected)));
  }
  return s;
}

absl::Status WeightMap::Check(std::string_view name,
                              const Shape& expected) const {
  return Find(name, expected).status();
}

absl::StatusOr<Tensor> WeightMap::Get(std::string_view name,
                                      const Shape& expected) const {
  TWICE_ASSIGN_OR_RETURN(Stored s, Find(name, expected));
  return s.file->ReadF32(*s.entry);
}

absl::StatusOr<Tensor> WeightMap::GetMatrix(std::string_view name,
                                            const Shape& expected) const {
  TWICE_ASSIGN_OR_RETURN(Stored s, Find(name, expected));
  TWICE_ASSIGN_OR_RETURN(Tensor stored, s.file->Read(*s.entry));
  if (!matrix_dtype_.has_value() || *matrix_dtype_ == stored.dtype()) {
    return stored;
  }
  absl::StatusOr<Tensor> converted =
      kernels::ConvertTensor(stored, *matrix_dtype_);
  // The stored bytes are not read again (the fingerprint read them first).
  if (converted.ok() && stored.is_view()) s.file->ReleasePages(*s.entry);
  return converted;
}

absl::StatusOr<std::vector<Tensor>> WeightMap::GetMatrixStack(
    std::string_view name, const Shape& expected) const {
  if (expected.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetMatrixStack(", AbslView(name),
                     "): expected a shape [count, rows, cols], got ",
                     ShapeToString(expected)));
  }
  TWICE_ASSIGN_OR_RETURN(Stored s, Find(name, expected));
  TWICE_ASSIGN_OR_RETURN(Tensor stored, s.file->Read(*s.entry));
  const Shape matrix = {expected[1], expected[2]};
  const int64_t matrix_bytes = NumElements(matrix) * DTypeSize(stored.dtype());
  const auto* base = static_cast<const char*>(stored.raw_data());
  const bool convert =
      matrix_dtype_.has_value() && *matrix_dtype_ != stored.dtype();
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(expected[0]));
  for (int64_t i = 0; i < expected[0]; ++i) {
    Tensor slice =
        Tensor::ViewOf(stored.dtype(), base + i * matrix_bytes, matrix);
    if (!stored.is_view()) {
      // An unaligned F32 tensor was read as a copy that dies here: each
      // slice gets its own.
      const float* f = slice.data();
      slice = Tensor::FromVector(
          matrix, std::vector<float>(f, f + NumElements(matrix)));
    }
    // Otherwise the slices view the mapping, which lives as long as this
    // map.
    if (!convert) {
      out.push_back(std::move(slice));
      continue;
    }
    TWICE_ASSIGN_OR_RETURN(Tensor converted,
                           kernels::ConvertTensor(slice, *matrix_dtype_));
    out.push_back(std::move(converted));
  }
  if (convert && stored.is_view()) s.file->ReleasePages(*s.entry);
  return out;
}

}  // namespace twice::engine
