#include "storage/rados/rados_record_watch.h"

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/rados/rados_document_catalog.h"
#include "storage/rados/rados_status.h"

namespace twice::storage {
namespace {

constexpr std::chrono::milliseconds kCoarseClockMargin{100};

}  // namespace

// One registration's callbacks. librados calls them on its own thread; a
// notify is counted before it is acknowledged, so a writer's Announce
// returns only after this process has stopped trusting.
class RadosRecordWatch::Callback final : public librados::WatchCtx2 {
 public:
  Callback(RadosRecordWatch& owner, std::string object, uint64_t registration)
      : owner_(owner),
        object_(std::move(object)),
        registration_(registration) {}

  void handle_notify(uint64_t notify_id, uint64_t cookie, uint64_t,
                     ceph::bufferlist&) override {
    owner_.Changed(object_, registration_, /*broken=*/false);
    ceph::bufferlist empty;
    owner_.pool_.notify_ack(object_, notify_id, cookie, empty);
  }
  // The watch is gone (the OSD timed it out, the object was removed): a
  // notify may have been missed.
  void handle_error(uint64_t, int) override {
    owner_.Changed(object_, registration_, /*broken=*/true);
  }

 private:
  RadosRecordWatch& owner_;
  const std::string object_;
  const uint64_t registration_;
};

RadosRecordWatch::RadosRecordWatch(RadosCluster& cluster, librados::IoCtx pool,
                                   RecordWatchOptions options)
    : cluster_(cluster), pool_(std::move(pool)), options_(options) {}

RadosRecordWatch::~RadosRecordWatch() {
  std::vector<Watched> retired;
  {
    absl::MutexLock registering(&register_mu_);
    absl::MutexLock lock(&mu_);
    for (auto& [object, watched] : watched_) {
      retired.push_back(std::move(watched));
    }
    watched_.clear();
    recency_.clear();
  }
  Retire(std::move(retired));
}

std::optional<RecordWatch::Mark> RadosRecordWatch::MarkLocked(
    const std::string& object) {
  auto it = watched_.find(object);
  if (it == watched_.end() || it->second.broken) return std::nullopt;
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  return Mark{object, it->second.registration, it->second.changes,
              std::chrono::steady_clock::now()};
}

absl::StatusOr<RecordWatch::Mark> RadosRecordWatch::Begin(
    const DocumentRef& document) {
  const std::string object =
      IndexObjectName(document.tenant, document.document_id);
  {
    absl::MutexLock lock(&mu_);
    if (std::optional<Mark> mark = MarkLocked(object)) return *mark;
  }
  absl::MutexLock registering(&register_mu_);
  std::vector<Watched> retired;
  {
    absl::MutexLock lock(&mu_);
    // Another caller may have registered it meanwhile.
    if (std::optional<Mark> mark = MarkLocked(object)) return *mark;
    if (auto it = watched_.find(object); it != watched_.end()) {
      recency_.erase(it->second.recency);
      retired.push_back(std::move(it->second));
      watched_.erase(it);
    }
  }
  const uint64_t registration = ++next_registration_;
  auto callback = std::make_unique<Callback>(*this, object, registration);
  uint64_t handle = 0;
  // Returns once the OSD holds the watch: every commit after this point is
  // notified to it.
  const int r = pool_.watch2(object, &handle, callback.get());
  if (r < 0) {
    Retire(std::move(retired));
    return FromRados(r, absl::StrCat("watching ", object));
  }
  Mark mark;
  {
    absl::MutexLock lock(&mu_);
    recency_.push_front(object);
    Watched& watched = watched_[object];
    watched.handle = handle;
    watched.registration = registration;
    watched.callback = std::move(callback);
    watched.recency = recency_.begin();
    // The one just registered is the most recent, so it stays.
    while (static_cast<int>(watched_.size()) >
           std::max(1, options_.max_watches)) {
      auto oldest = watched_.find(recency_.back());
      recency_.pop_back();
      retired.push_back(std::move(oldest->second));
      watched_.erase(oldest);
    }
    mark = *MarkLocked(object);
  }
  Retire(std::move(retired));
  return mark;
}

bool RadosRecordWatch::Unchanged(const Mark& mark) {
  if (std::chrono::steady_clock::now() - mark.begun >= options_.max_mark_age) {
    return false;
  }
  absl::MutexLock lock(&mu_);
  auto it = watched_.find(mark.watched);
  if (it == watched_.end()) return false;
  Watched& watched = it->second;
  if (watched.broken || watched.registration != mark.registration ||
      watched.changes != mark.changes) {
    return false;
  }
  // Milliseconds since librados last confirmed the watch with its OSD, or
  // the watch's error.
  const int age = pool_.watch_check(watched.handle);
  if (age < 0) {
    watched.broken = true;  // the next Begin registers it again
    changes_seen_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return age < options_.lease.count();
}

void RadosRecordWatch::Announce(const std::string& index_object) {
  ceph::bufferlist payload;
  ceph::bufferlist acknowledgements;
  const int64_t seconds =
      std::max<int64_t>(1, (options_.notify_timeout.count() + 999) / 1000);
  const int r =
      pool_.notify2(index_object, payload,
                    static_cast<uint64_t>(seconds * 1000), &acknowledgements);
  // No object, no watcher.
  if (r == 0 || r == -ENOENT) return;
  // Some watcher may not have counted the change: wait until its trust has
  // lapsed for want of confirmation (and a little more: librados times
  // watches with a coarse clock).
  unacknowledged_.fetch_add(1, std::memory_order_relaxed);
  std::this_thread::sleep_for(options_.lease + kCoarseClockMargin);
}

void RadosRecordWatch::Changed(const std::string& object, uint64_t registration,
                               bool broken) {
  changes_seen_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  auto it = watched_.find(object);
  // A change before Begin returned is in what the caller reads next; one
  // for a dropped registration concerns no mark in use.
  if (it == watched_.end() || it->second.registration != registration) return;
  ++it->second.changes;
  if (broken) it->second.broken = true;
}

void RadosRecordWatch::Retire(std::vector<Watched> retired) {
  if (retired.empty()) return;
  for (const Watched& watched : retired) (void)pool_.unwatch2(watched.handle);
  // No callback of theirs may run after their objects are freed.
  cluster_.FlushWatchCallbacks();
}

}  // namespace twice::storage
