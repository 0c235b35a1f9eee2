#include "storage/rados/rados_objects.h"

#include <cerrno>
#include <ctime>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/rados/rados_status.h"

namespace twice::storage {
namespace {

// A bufferlist over `bytes` without a copy.
ceph::bufferlist View(std::string_view bytes) {
  ceph::bufferlist list;
  if (!bytes.empty()) {
    list.push_back(ceph::buffer::create_static(
        static_cast<unsigned>(bytes.size()), const_cast<char*>(bytes.data())));
  }
  return list;
}

}  // namespace

absl::Status PutImmutableObject(librados::IoCtx& pool, const std::string& name,
                                std::string_view bytes,
                                const ObjectAttributes& attributes) {
  librados::ObjectWriteOperation op;
  op.create(/*exclusive=*/true);
  ceph::bufferlist data = View(bytes);
  op.write_full(data);
  for (const auto& [key, value] : attributes) {
    ceph::bufferlist attribute;
    attribute.append(value);
    op.setxattr(key.c_str(), attribute);
  }
  const int r = pool.operate(name, &op);
  // A content address names one value: the object is already the one
  // this call would have written.
  if (r == -EEXIST) return absl::OkStatus();
  return FromRados(r, absl::StrCat("writing object ", name));
}

absl::StatusOr<ceph::bufferlist> ReadObjectBytes(librados::IoCtx& pool,
                                                 const std::string& name) {
  // One round trip: a read of length 0 is a read of the whole object.
  ceph::bufferlist data;
  if (int r = pool.read(name, data, 0, 0); r < 0) {
    return FromRados(r, absl::StrCat("reading object ", name));
  }
  return data;
}

absl::StatusOr<std::string> ReadObject(librados::IoCtx& pool,
                                       const std::string& name) {
  absl::StatusOr<ceph::bufferlist> data = ReadObjectBytes(pool, name);
  if (!data.ok()) return data.status();
  return data->to_str();
}

std::string PartObjectName(const std::string& name, uint64_t index) {
  return absl::StrCat("p.", name, ".", index);
}

absl::Status PutStripedObject(librados::IoCtx& pool, const std::string& name,
                              std::string_view bytes,
                              ObjectAttributes attributes,
                              uint64_t part_bytes) {
  if (part_bytes == 0) {
    return absl::InvalidArgumentError("part_bytes must be positive");
  }
  const uint64_t parts =
      bytes.empty() ? 1 : (bytes.size() + part_bytes - 1) / part_bytes;
  // Parts carry the head's attributes too, its write time among them, so
  // the janitor leaves the parts of a write in flight alone.
  for (uint64_t i = 1; i < parts; ++i) {
    if (absl::Status put = PutImmutableObject(
            pool, PartObjectName(name, i),
            bytes.substr(i * part_bytes, part_bytes), attributes);
        !put.ok()) {
      return put;
    }
  }
  if (parts > 1) attributes[kPartsAttribute] = std::to_string(parts);
  return PutImmutableObject(pool, name, bytes.substr(0, part_bytes),
                            attributes);
}

absl::StatusOr<ceph::bufferlist> ReadStripedObject(librados::IoCtx& pool,
                                                   const std::string& name) {
  // Head and attributes in one round trip.
  librados::ObjectReadOperation op;
  ceph::bufferlist data;
  std::map<std::string, ceph::bufferlist> attributes;
  int read = 0, listed = 0;
  op.read(0, 0, &data, &read);
  op.getxattrs(&attributes, &listed);
  if (int r = pool.operate(name, &op, nullptr); r < 0) {
    return FromRados(r, absl::StrCat("reading object ", name));
  }
  auto it = attributes.find(kPartsAttribute);
  if (it == attributes.end()) return data;
  uint64_t parts = 0;
  if (!absl::SimpleAtoi(it->second.to_str(), &parts) || parts < 2) {
    return absl::DataLossError(
        absl::StrCat("object ", name, " has a bad part count"));
  }
  for (uint64_t i = 1; i < parts; ++i) {
    ceph::bufferlist part;
    const std::string part_name = PartObjectName(name, i);
    if (int r = pool.read(part_name, part, 0, 0); r < 0) {
      if (r == -ENOENT) {
        return absl::DataLossError(
            absl::StrCat("part ", part_name, " of ", name, " is missing"));
      }
      return FromRados(r, absl::StrCat("reading object ", part_name));
    }
    data.claim_append(part);
  }
  return data;
}

absl::Status RemoveStripedObject(librados::IoCtx& pool,
                                 const std::string& name) {
  uint64_t parts = 1;
  ceph::bufferlist count;
  if (pool.getxattr(name, kPartsAttribute, count) >= 0) {
    (void)absl::SimpleAtoi(count.to_str(), &parts);
  }
  if (absl::Status removed = RemoveObject(pool, name); !removed.ok()) {
    return removed;
  }
  // Without their head the parts are unnamed; one left behind by a failure
  // here is the janitor's.
  for (uint64_t i = 1; i < parts; ++i) {
    if (absl::Status removed = RemoveObject(pool, PartObjectName(name, i));
        !removed.ok()) {
      return removed;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<uint64_t>> StatObject(librados::IoCtx& pool,
                                                   const std::string& name) {
  uint64_t size = 0;
  time_t mtime = 0;
  const int r = pool.stat(name, &size, &mtime);
  if (r == -ENOENT) return std::optional<uint64_t>();
  if (r < 0) return FromRados(r, absl::StrCat("stat of object ", name));
  return std::optional<uint64_t>(size);
}

absl::StatusOr<ObjectAttributes> ReadAttributes(librados::IoCtx& pool,
                                                const std::string& name) {
  std::map<std::string, ceph::bufferlist> raw;
  if (int r = pool.getxattrs(name, raw); r < 0) {
    return FromRados(r, absl::StrCat("reading the attributes of ", name));
  }
  ObjectAttributes attributes;
  for (auto& [key, value] : raw) attributes[key] = value.to_str();
  return attributes;
}

absl::Status RemoveObject(librados::IoCtx& pool, const std::string& name) {
  const int r = pool.remove(name);
  if (r == -ENOENT) return absl::OkStatus();
  return FromRados(r, absl::StrCat("removing object ", name));
}

absl::Status ForEachObject(
    librados::IoCtx& pool, std::string_view prefix,
    const std::function<absl::Status(const std::string& name)>& visit) {
  constexpr int kListBatch = 1000;
  librados::ObjectCursor cursor = pool.object_list_begin();
  const librados::ObjectCursor end = pool.object_list_end();
  while (!pool.object_list_is_end(cursor)) {
    std::vector<librados::ObjectItem> items;
    librados::ObjectCursor next;
    if (int r = pool.object_list(cursor, end, kListBatch, {}, &items, &next);
        r < 0) {
      return FromRados(r, "listing a pool");
    }
    for (const librados::ObjectItem& item : items) {
      if (item.oid.compare(0, prefix.size(), prefix) != 0) continue;
      if (absl::Status s = visit(item.oid); !s.ok()) return s;
    }
    cursor = next;
  }
  return absl::OkStatus();
}

absl::Status ForEachOmapEntry(
    librados::IoCtx& pool, const std::string& name, const std::string& prefix,
    const std::function<absl::Status(const std::string& key,
                                     const ceph::bufferlist& value)>& visit) {
  constexpr uint64_t kOmapBatch = 1000;
  std::string after = prefix;
  bool more = true;
  while (more) {
    librados::ObjectReadOperation op;
    std::map<std::string, ceph::bufferlist> values;
    int read = 0;
    op.omap_get_vals2(after, prefix, kOmapBatch, &values, &more, &read);
    const int r = pool.operate(name, &op, nullptr);
    if (r == -ENOENT) return absl::OkStatus();
    if (absl::Status s = FromRados(r < 0 ? r : read,
                                   absl::StrCat("reading the omap of ", name));
        !s.ok()) {
      return s;
    }
    for (const auto& [key, value] : values) {
      if (absl::Status s = visit(key, value); !s.ok()) return s;
      after = key;
    }
    if (values.empty()) break;
  }
  return absl::OkStatus();
}

}  // namespace twice::storage
