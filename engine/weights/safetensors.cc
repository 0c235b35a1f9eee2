#include "engine/weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/util/absl_view.h"
#include "kernels/immutable_host_regions.h"
#include "kernels/status_macros.h"
#include "nlohmann/json.hpp"

namespace twice::engine {
namespace {

// The format's own cap on the header (100 MB), which also bounds the JSON
// parser's work on hostile input.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Bounds on a dimension and on a tensor's byte size, so products cannot
// overflow int64.
constexpr uint64_t kMaxDim = uint64_t{1} << 40;
constexpr uint64_t kMaxBytes = uint64_t{1} << 50;

// Element size of every safetensors dtype; 0 when unknown.
int AnyDTypeSize(std::string_view name) {
  if (name == "F64" || name == "I64" || name == "U64") return 8;
  if (name == "F32" || name == "I32" || name == "U32") return 4;
  if (name == "F16" || name == "BF16" || name == "I16" || name == "U16") {
    return 2;
  }
  if (name == "I8" || name == "U8" || name == "BOOL" || name == "F8_E4M3" ||
      name == "F8_E5M2") {
    return 1;
  }
  return 0;
}

[[nodiscard]] absl::Status Bad(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("safetensors file ", AbslView(path), ": ", AbslView(what)));
}

[[nodiscard]] absl::Status BadTensor(std::string_view path,
                                     std::string_view name,
                                     std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("safetensors file ", AbslView(path), ": tensor '",
                   AbslView(name), "': ", AbslView(what)));
}

[[nodiscard]] absl::StatusOr<SafetensorsEntry> ParseEntry(
    const std::string& name, const nlohmann::json& value, uint64_t data_size,
    std::string_view path) {
  if (!value.is_object())
    return BadTensor(path, name, "entry is not an object");
  SafetensorsEntry entry;
  entry.name = name;
  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    return BadTensor(path, name, "missing string \"dtype\"");
  }
  entry.dtype_name = dtype->get<std::string>();
  const int elem_size = AnyDTypeSize(entry.dtype_name);
  if (elem_size == 0) {
    return BadTensor(path, name,
                     absl::StrCat("unknown dtype \"", entry.dtype_name, "\""));
  }
  entry.dtype = ParseFloatDType(entry.dtype_name);

  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    return BadTensor(path, name, "missing array \"shape\"");
  }
  uint64_t bytes = static_cast<uint64_t>(elem_size);
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > kMaxDim) {
      return BadTensor(path, name,
                       "shape holds a negative, non-integer or "
                       "oversized dimension");
    }
    const uint64_t d = dim.get<uint64_t>();
    entry.shape.push_back(static_cast<int64_t>(d));
    if (d != 0 && bytes > kMaxBytes / d) {
      return BadTensor(path, name, "tensor is larger than 2^50 bytes");
    }
    bytes *= d;
  }

  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return BadTensor(path, name,
                     "\"data_offsets\" must be two non-negative integers");
  }
  const uint64_t begin = (*offsets)[0].get<uint64_t>();
  const uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return BadTensor(path, name,
                     absl::StrCat("data_offsets [", begin, ", ", end,
                                  ") fall outside the data section of ",
                                  data_size, " bytes"));
  }
  if (end - begin != bytes) {
    return BadTensor(
        path, name,
        absl::StrCat("shape ", ShapeToString(entry.shape), " of ",
                     entry.dtype_name, " needs ", bytes,
                     " bytes but data_offsets span ", end - begin));
  }
  entry.begin = static_cast<int64_t>(begin);
  entry.end = static_cast<int64_t>(end);
  return entry;
}

[[nodiscard]] absl::StatusOr<SafetensorsHeader> ParseHeaderJson(
    std::string_view json_text, uint64_t data_size, std::string_view path) {
  const nlohmann::json root =
      nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Bad(path, "header is not valid JSON");
  if (!root.is_object()) return Bad(path, "header is not a JSON object");
  SafetensorsHeader header;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Bad(path, "__metadata__ is not an object");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          return Bad(path, absl::StrCat("__metadata__ value of '", mkey,
                                        "' is not a string"));
        }
        header.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    TWICE_ASSIGN_OR_RETURN(SafetensorsEntry entry,
                           ParseEntry(key, value, data_size, path));
    header.entries.push_back(std::move(entry));
  }
  // Disjoint spans: sorted by start, each non-empty span must begin at or
  // after the end of the previous one.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : header.entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return BadTensor(
          path, by_offset[i]->name,
          absl::StrCat("data overlaps tensor '", by_offset[i - 1]->name, "'"));
    }
  }
  // nlohmann's object is an ordered std::map, so entries are name-sorted.
  return header;
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    std::string_view file_bytes, std::string_view path) {
  if (file_bytes.size() < 8) {
    return Bad(path, absl::StrCat("file has ", file_bytes.size(),
                                  " bytes, shorter than the 8-byte header "
                                  "length"));
  }
  uint64_t header_len;
  std::memcpy(&header_len, file_bytes.data(), 8);
  if (header_len > kMaxHeaderBytes || header_len > file_bytes.size() - 8) {
    return Bad(path, absl::StrCat("header length ", header_len,
                                  " exceeds the file size ", file_bytes.size(),
                                  " or the 100 MB limit"));
  }
  const uint64_t data_size = file_bytes.size() - 8 - header_len;
  try {
    TWICE_ASSIGN_OR_RETURN(
        SafetensorsHeader header,
        ParseHeaderJson(file_bytes.substr(8, header_len), data_size, path));
    header.data_offset = static_cast<int64_t>(8 + header_len);
    return header;
  } catch (const std::exception& e) {
    // Defensive: nlohmann reports type errors by exception.
    return Bad(path, absl::StrCat("malformed header: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot open safetensors file ", path,
                                         ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg)
                         : absl::UnavailableError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_size_ = static_cast<size_t>(st.st_size);
  if (file->map_size_ > 0) {
    void* map = ::mmap(nullptr, file->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(
          absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
    }
    file->map_ = static_cast<const uint8_t*>(map);
    // A read-only mapping cannot change under us: a device kernel backend
    // may upload its tensors once (kernels/immutable_host_regions.h).
    file->region_id_ =
        kernels::RegisterImmutableHostRegion(file->map_, file->map_size_);
  }
  ::close(fd);  // the mapping keeps the file alive
  TWICE_ASSIGN_OR_RETURN(
      file->header_,
      ParseSafetensorsHeader(
          std::string_view(reinterpret_cast<const char*>(file->map_),
                           file->map_size_),
          path));
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) {
    kernels::UnregisterImmutableHostRegion(region_id_);
    ::munmap(const_cast<uint8_t*>(map_), map_size_);
  }
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  const auto& entries = header_.entries;
  auto it = std::lower_bound(
      entries.begin(), entries.end(), name,
      [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  if (it == entries.end() || it->name != name) return nullptr;
  return &*it;
}

absl::Span<const uint8_t> SafetensorsFile::Bytes(
    const SafetensorsEntry& entry) const {
  return absl::MakeConstSpan(map_ + header_.data_offset + entry.begin,
                             static_cast<size_t>(entry.end - entry.begin));
}

void SafetensorsFile::ReleasePages(const SafetensorsEntry& entry) const {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(Bytes(entry).data());
  const uintptr_t end = begin + static_cast<uintptr_t>(entry.end - entry.begin);
  // Only pages wholly inside the tensor: a neighbour may still be in use.
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = end / page * page;
  if (last > first) {
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
}

absl::StatusOr<Tensor> SafetensorsFile::Read(
    const SafetensorsEntry& entry) const {
  if (!entry.dtype.has_value() || *entry.dtype == DType::kF32) {
    return ReadF32(entry);
  }
  return Tensor::ViewOf(*entry.dtype, Bytes(entry).data(), entry.shape);
}

absl::StatusOr<Tensor> SafetensorsFile::ReadF32(
    const SafetensorsEntry& entry) const {
  if (!entry.dtype.has_value()) {
    return BadTensor(path_, entry.name,
                     absl::StrCat("dtype ", entry.dtype_name,
                                  " cannot be used as weights (need F32, "
                                  "BF16 or F16)"));
  }
  const absl::Span<const uint8_t> bytes = Bytes(entry);
  const int64_t count = NumElements(entry.shape);
  if (*entry.dtype == DType::kF32 &&
      reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    return Tensor::View(reinterpret_cast<const float*>(bytes.data()),
                        entry.shape);
  }
  Tensor out = Tensor::Zeros(entry.shape);
  ConvertToF32(*entry.dtype, bytes.data(), count, out.mutable_data());
  return out;
}

}  // namespace twice::engine
