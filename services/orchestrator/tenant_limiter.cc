#include "services/orchestrator/tenant_limiter.h"

#include "absl/strings/str_cat.h"

namespace twice::services {

absl::StatusOr<std::shared_ptr<void>> TenantLimiter::EnterCall(
    const std::string& tenant) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (limits_.max_concurrent_calls > 0 &&
        calls_ >= limits_.max_concurrent_calls) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the service is serving ", calls_, " calls, its limit (",
                       "max_concurrent_calls); retry later"));
    }
    int& mine = tenant_calls_[tenant];
    if (limits_.max_concurrent_calls_per_tenant > 0 &&
        mine >= limits_.max_concurrent_calls_per_tenant) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this tenant has ", mine, " calls in flight, its limit (",
          "max_concurrent_calls_per_tenant); retry later"));
    }
    ++mine;
    ++calls_;
  }
  // The deleter releases the slot; the pointer itself carries nothing.
  return std::shared_ptr<void>(
      this, [tenant](TenantLimiter* limiter) { limiter->Leave(tenant); });
}

void TenantLimiter::Leave(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  --calls_;
  auto it = tenant_calls_.find(tenant);
  if (it != tenant_calls_.end() && --it->second == 0) tenant_calls_.erase(it);
}

absl::Status TenantLimiter::ChargeIngest(const std::string& tenant,
                                         int64_t tokens, absl::Time now) {
  if (limits_.max_ingest_tokens_per_minute <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto& window = ingested_[tenant];
  int64_t used = 0;
  while (!window.empty() && now - window.front().first >= absl::Minutes(1)) {
    window.pop_front();
  }
  for (const auto& [time, n] : window) used += n;
  if (used + tokens > limits_.max_ingest_tokens_per_minute) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ingesting ", tokens, " tokens would bring this tenant to ",
        used + tokens, " in the last minute; the limit is ",
        limits_.max_ingest_tokens_per_minute,
        " (max_ingest_tokens_per_minute)"));
  }
  window.emplace_back(now, tokens);
  return absl::OkStatus();
}

}  // namespace twice::services
