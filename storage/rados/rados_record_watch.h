// RadosRecordWatch: the RecordWatch (storage/record_watch.h) of the RADOS
// catalog, by Ceph's watch/notify on the per-tenant index objects that
// hold the records (rados_document_catalog.h).
//
// Reader side: Begin() registers a watch on the document's index object
// (once per object, kept up to max_watches, the least recently used
// dropped first). A notify on that object, or any error of its watch,
// counts as a change and ends every mark taken on it before. A mark also
// ends when librados has not confirmed the watch for `lease`
// (IoCtx::watch_check: librados pings each watch every few seconds), so a
// reader cut off from the object's OSD stops trusting within the lease.
//
// Writer side: every commit to an index object is followed by Announce(),
// a notify that returns once every watcher has counted the change (each
// acknowledges from its callback, after counting). When some watcher does
// not acknowledge within notify_timeout (a crashed process whose watch the
// OSD still holds, a partition), Announce waits out the lease as well, so
// that watcher has stopped trusting what it kept by the time the write is
// acknowledged to its caller. A commit whose outcome is unknown (a timed
// out operation, UNAVAILABLE) is announced the same way; its notify
// follows it to the same OSD and placement group, so it is processed after
// the write if the write arrived at all.
//
// The one case this cannot see: a write that reached its OSD just before
// the writer's connection broke, whose notify never arrived, while the
// watchers' own connections to that OSD stayed healthy. A mark therefore
// also ends `max_mark_age` after it was taken, which bounds how long such
// a write can go unseen (the reader then reads again and takes a new one).
//
// Thread-safe.
#ifndef TWICE_STORAGE_RADOS_RADOS_RECORD_WATCH_H_
#define TWICE_STORAGE_RADOS_RADOS_RECORD_WATCH_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <rados/librados.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/rados/rados_cluster.h"
#include "storage/record_watch.h"

namespace twice::storage {

struct RecordWatchOptions {
  // How long after librados last confirmed a watch the records read under
  // it are trusted. Longer than librados' ping interval
  // (objecter_tick_interval, 5 s by default), or trust would lapse between
  // pings.
  std::chrono::milliseconds lease{10000};
  // How long a writer waits for every watcher's acknowledgement before it
  // waits out the lease instead. Whole seconds, at least 1: librados
  // passes the OSD seconds, rounded down, and 0 would mean the OSD's
  // default (osd_default_notify_timeout, 30 s); a fraction is rounded up.
  std::chrono::milliseconds notify_timeout{2000};
  // How long a mark is trusted at most, whatever the watch says.
  std::chrono::milliseconds max_mark_age{30000};
  // Index objects one process watches at once (at least 1).
  int max_watches = 1024;
};

class RadosRecordWatch final : public RecordWatch {
 public:
  // Watches objects of `pool` (the catalog's meta pool) through `cluster`,
  // which must outlive this object.
  RadosRecordWatch(RadosCluster& cluster, librados::IoCtx pool,
                   RecordWatchOptions options);
  // Drops every watch and waits for callbacks in flight.
  ~RadosRecordWatch() override;
  RadosRecordWatch(const RadosRecordWatch&) = delete;
  RadosRecordWatch& operator=(const RadosRecordWatch&) = delete;

  absl::StatusOr<Mark> Begin(const DocumentRef& document) override;
  bool Unchanged(const Mark& mark) override;

  // Tells every watcher of `index_object` that a record in it changed
  // (above); returns when none of them can still trust what it kept.
  void Announce(const std::string& index_object);

  // Announcements that some watcher did not acknowledge in time (each
  // waited out the lease).
  int64_t unacknowledged_announcements() const {
    return unacknowledged_.load(std::memory_order_relaxed);
  }
  // Changes this process's watches have seen (notifies and errors).
  int64_t changes_seen() const {
    return changes_seen_.load(std::memory_order_relaxed);
  }

 private:
  class Callback;
  struct Watched {
    uint64_t handle = 0;
    uint64_t registration = 0;
    uint64_t changes = 0;
    bool broken = false;
    std::unique_ptr<Callback> callback;
    std::list<std::string>::iterator recency;
  };

  // From the callbacks (librados' thread).
  void Changed(const std::string& object, uint64_t registration, bool broken);
  // Drops `retired` watches (unwatch, then waits for their callbacks).
  void Retire(std::vector<Watched> retired);
  std::optional<Mark> MarkLocked(const std::string& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RadosCluster& cluster_;
  librados::IoCtx pool_;
  const RecordWatchOptions options_;

  absl::Mutex register_mu_;  // one registration at a time
  // Held across watch_check too: a handle is a pointer inside librados,
  // and must not be unwatched while it is read.
  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(register_mu_);
  std::unordered_map<std::string, Watched> watched_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // most recent first
  uint64_t next_registration_ ABSL_GUARDED_BY(register_mu_) = 0;

  std::atomic<int64_t> unacknowledged_{0};
  std::atomic<int64_t> changes_seen_{0};
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_RADOS_RADOS_RECORD_WATCH_H_
