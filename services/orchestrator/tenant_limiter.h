// TenantLimiter: admission limits of the orchestrator's working calls
// (Ingest, Append, Ask, BatchAsk) by tenant, so one tenant cannot take the
// whole service from the others.
//
//   concurrent calls      all tenants together, and per tenant: a call
//                         holds a slot from admission to its end
//   ingest tokens         per tenant, a sliding one-minute window of
//                         document tokens read by Ingest and Append
//
// Exceeding one answers RESOURCE_EXHAUSTED naming the limit (the flag), so
// a client knows what to back off from. 0 disables a limit. Thread-safe.
#ifndef TWICE_SERVICES_ORCHESTRATOR_TENANT_LIMITER_H_
#define TWICE_SERVICES_ORCHESTRATOR_TENANT_LIMITER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace twice::services {

struct TenantLimits {
  // Working calls in flight, all tenants. Default: 0 (unlimited).
  int max_concurrent_calls = 0;
  // Working calls in flight, one tenant. Default: 0 (unlimited).
  int max_concurrent_calls_per_tenant = 0;
  // Document tokens one tenant may ingest or append per minute. A document
  // larger than this can never be ingested. Default: 0 (unlimited).
  int64_t max_ingest_tokens_per_minute = 0;
};

class TenantLimiter {
 public:
  explicit TenantLimiter(TenantLimits limits) : limits_(limits) {}

  // Admits one call of `tenant`; the slot is released when the returned
  // guard is destroyed. RESOURCE_EXHAUSTED when a concurrency limit is
  // reached.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<void>> EnterCall(
      const std::string& tenant);

  // Charges `tokens` ingested by `tenant` at `now`; RESOURCE_EXHAUSTED (and
  // nothing charged) when the last minute's tokens plus these would exceed
  // the limit.
  [[nodiscard]] absl::Status ChargeIngest(const std::string& tenant,
                                          int64_t tokens,
                                          absl::Time now = absl::Now());

 private:
  void Leave(const std::string& tenant);

  const TenantLimits limits_;
  std::mutex mu_;
  int calls_ = 0;
  std::map<std::string, int> tenant_calls_;
  // Per tenant: (time, tokens) of the last minute's charges, oldest first.
  std::map<std::string, std::deque<std::pair<absl::Time, int64_t>>> ingested_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_TENANT_LIMITER_H_
