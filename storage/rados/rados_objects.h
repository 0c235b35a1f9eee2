// The object operations the RADOS store is made of, each one librados
// operation with its result mapped by FromRados (rados_status.h).
//
// States, blocks and token lists are immutable objects named by their
// content address, so a write is an exclusive create and an object that
// already exists is a success: it holds the same bytes (the readers verify
// them anyway, in the envelope every value carries).
#ifndef TWICE_STORAGE_RADOS_RADOS_OBJECTS_H_
#define TWICE_STORAGE_RADOS_RADOS_OBJECTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <rados/librados.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::storage {

// Small fields stored beside an object's bytes (index fields of a state:
// recompute cost, write time, form).
using ObjectAttributes = std::map<std::string, std::string>;

// Creates the immutable object `name` holding `bytes` and `attributes`, in
// one operation: all of it or nothing. OK when it exists already. The bytes
// are not copied; they must stay valid until the call returns.
[[nodiscard]] absl::Status PutImmutableObject(
    librados::IoCtx& pool, const std::string& name, std::string_view bytes,
    const ObjectAttributes& attributes = {});

// A value larger than `part_bytes` (the cluster refuses writes past
// osd_max_write_size, 90 MiB by default) is striped: the object `name`
// holds its first part_bytes and the attribute twice.parts = the number of
// parts; parts 1.. are the objects PartObjectName(name, i). Parts are
// written before the head, so a crash leaves only unnamed parts (the
// janitor collects them), never a head whose parts are missing. A value
// that fits is one object, exactly as PutImmutableObject writes it.
[[nodiscard]] absl::Status PutStripedObject(librados::IoCtx& pool,
                                            const std::string& name,
                                            std::string_view bytes,
                                            ObjectAttributes attributes,
                                            uint64_t part_bytes);
// Reads what PutStripedObject wrote, parts joined; NOT_FOUND when the head
// is missing, DATA_LOSS when a part is.
[[nodiscard]] absl::StatusOr<ceph::bufferlist> ReadStripedObject(
    librados::IoCtx& pool, const std::string& name);
// Removes the head, then its parts; OK when the head does not exist.
[[nodiscard]] absl::Status RemoveStripedObject(librados::IoCtx& pool,
                                               const std::string& name);
// "p.<name>.<index>"; the head of a part is what lies between.
std::string PartObjectName(const std::string& name, uint64_t index);
inline constexpr char kPartsAttribute[] = "twice.parts";

// The whole object `name`; NOT_FOUND when it does not exist.
[[nodiscard]] absl::StatusOr<std::string> ReadObject(librados::IoCtx& pool,
                                                     const std::string& name);
// The same, as the bytes librados received (no copy; `c_str()` of a
// bufferlist that arrived in one piece is a view of it): for large values
// that are decoded, not kept.
[[nodiscard]] absl::StatusOr<ceph::bufferlist> ReadObjectBytes(
    librados::IoCtx& pool, const std::string& name);

// The size of object `name`; nullopt when it does not exist.
[[nodiscard]] absl::StatusOr<std::optional<uint64_t>> StatObject(
    librados::IoCtx& pool, const std::string& name);

// The attributes of object `name`; NOT_FOUND when it does not exist.
[[nodiscard]] absl::StatusOr<ObjectAttributes> ReadAttributes(
    librados::IoCtx& pool, const std::string& name);

// Removes object `name`; OK when it does not exist.
[[nodiscard]] absl::Status RemoveObject(librados::IoCtx& pool,
                                        const std::string& name);

// Calls `visit` with the name of every object in `pool` whose name starts
// with `prefix`, in the pool's order, stopping at the first error `visit`
// returns. Objects written or removed meanwhile may or may not be seen.
[[nodiscard]] absl::Status ForEachObject(
    librados::IoCtx& pool, std::string_view prefix,
    const std::function<absl::Status(const std::string& name)>& visit);

// Calls `visit` with every omap entry of object `name` whose key starts
// with `prefix`, in key order, a page at a time. OK (nothing visited) when
// the object does not exist.
[[nodiscard]] absl::Status ForEachOmapEntry(
    librados::IoCtx& pool, const std::string& name, const std::string& prefix,
    const std::function<absl::Status(const std::string& key,
                                     const ceph::bufferlist& value)>& visit);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_OBJECTS_H_
