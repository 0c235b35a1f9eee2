#include "engine/weights/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

// Header JSON and the data offsets of every tensor, in name order.
[[nodiscard]] absl::StatusOr<std::string> BuildHeader(
    std::vector<NamedTensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor& a, const NamedTensor& b) {
              return a.name < b.name;
            });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (t.name.empty() || t.name == "__metadata__" || t.tensor == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteSafetensors: invalid tensor name '", t.name, "'"));
    }
    if (i > 0 && tensors[i - 1].name == t.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteSafetensors: duplicate tensor '", t.name, "'"));
    }
    if (t.tensor->dtype() == DType::kI8 || t.tensor->device() != Device::kCpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteSafetensors: tensor '", t.name, "' is ",
                       std::string(DTypeName(t.tensor->dtype())), " on ",
                       std::string(kernels::DeviceName(t.tensor->device())),
                       " (F32, BF16 or F16 in host memory can be stored)"));
    }
    const int64_t bytes = t.tensor->ByteSize();
    header[t.name] = {{"dtype", std::string(DTypeName(t.tensor->dtype()))},
                      {"shape", t.tensor->shape()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

}  // namespace

absl::StatusOr<std::string> SerializeSafetensors(
    std::vector<NamedTensor> tensors,
    const std::map<std::string, std::string>& metadata) {
  TWICE_ASSIGN_OR_RETURN(std::string json, BuildHeader(tensors, metadata));
  std::string out(8, '\0');
  const uint64_t len = json.size();
  std::memcpy(out.data(), &len, 8);
  out += json;
  for (const NamedTensor& t : tensors) {
    if (t.tensor->size() == 0) continue;
    out.append(static_cast<const char*>(t.tensor->raw_data()),
               static_cast<size_t>(t.tensor->ByteSize()));
  }
  return out;
}

absl::Status WriteSafetensors(
    const std::string& path, std::vector<NamedTensor> tensors,
    const std::map<std::string, std::string>& metadata) {
  TWICE_ASSIGN_OR_RETURN(std::string json, BuildHeader(tensors, metadata));
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  const uint64_t len = json.size();
  bool ok = std::fwrite(&len, 8, 1, f) == 1 &&
            std::fwrite(json.data(), 1, json.size(), f) == json.size();
  // Tensor by tensor, so a large model is never copied into one buffer.
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    const size_t n = static_cast<size_t>(tensors[i].tensor->ByteSize());
    if (n == 0) continue;  // an empty tensor may have no buffer at all
    ok = std::fwrite(tensors[i].tensor->raw_data(), 1, n, f) == n;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace twice::engine
