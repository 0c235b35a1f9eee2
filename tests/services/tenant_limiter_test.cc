// TenantLimiter's admission rules, and the ingest-rate limit through a real
// twice-server.
#include "services/orchestrator/tenant_limiter.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice::services {
namespace {

TEST(TenantLimiterTest, ConcurrentCallsPerTenantAndInAll) {
  TenantLimits limits;
  limits.max_concurrent_calls = 3;
  limits.max_concurrent_calls_per_tenant = 2;
  TenantLimiter limiter(limits);
  std::vector<std::shared_ptr<void>> held;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::shared_ptr<void>> slot = limiter.EnterCall("a");
    ASSERT_OK(slot);
    held.push_back(*slot);
  }
  absl::StatusOr<std::shared_ptr<void>> third = limiter.EnterCall("a");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("max_concurrent_calls_per_tenant"),
            std::string::npos);
  // Another tenant still gets in, up to the global limit.
  absl::StatusOr<std::shared_ptr<void>> b = limiter.EnterCall("b");
  ASSERT_OK(b);
  absl::StatusOr<std::shared_ptr<void>> c = limiter.EnterCall("c");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("(max_concurrent_calls)"),
            std::string::npos);
  // Slots come back when their guards go.
  held.pop_back();
  EXPECT_OK(limiter.EnterCall("a"));
  b->reset();
  EXPECT_OK(limiter.EnterCall("c"));
}

TEST(TenantLimiterTest, ZeroMeansNoLimit) {
  TenantLimiter limiter{TenantLimits{}};
  std::vector<std::shared_ptr<void>> held;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::shared_ptr<void>> slot = limiter.EnterCall("a");
    ASSERT_OK(slot);
    held.push_back(*slot);
  }
  EXPECT_OK(limiter.ChargeIngest("a", int64_t{1} << 40));
}

TEST(TenantLimiterTest, IngestTokensSlideOverOneMinutePerTenant) {
  TenantLimits limits;
  limits.max_ingest_tokens_per_minute = 1000;
  TenantLimiter limiter(limits);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ASSERT_OK(limiter.ChargeIngest("a", 600, t0));
  ASSERT_OK(limiter.ChargeIngest("a", 400, t0 + absl::Seconds(10)));
  const absl::Status over =
      limiter.ChargeIngest("a", 1, t0 + absl::Seconds(59));
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("max_ingest_tokens_per_minute"),
            std::string::npos);
  // Another tenant has its own budget.
  EXPECT_OK(limiter.ChargeIngest("b", 1000, t0 + absl::Seconds(59)));
  // A refused charge costs nothing; once the first 600 leave the window,
  // 600 fit again, 601 do not.
  EXPECT_FALSE(limiter.ChargeIngest("a", 601, t0 + absl::Seconds(60)).ok());
  EXPECT_OK(limiter.ChargeIngest("a", 600, t0 + absl::Seconds(60)));
  // A document larger than the budget never fits.
  EXPECT_FALSE(limiter.ChargeIngest("c", 1001, t0).ok());
}

TEST(TenantLimiterTest, ServerRefusesIngestsBeyondTheRate) {
  testing::TempDir dir;
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--data-dir=" + dir.path() + "/data",
                            "--max-ingest-tokens-per-minute=500"},
                           dir.path() + "/server.log"))
      << server.stderr_text();
  testing::WorkflowClient client(server.address());
  std::vector<int32_t> tokens(300);
  for (int i = 0; i < 300; ++i) tokens[i] = 100 + i;
  ASSERT_OK(client.Ingest(tokens, 128, "first").status);
  const testing::IngestResult second = client.Ingest(tokens, 128, "second");
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(second.status.error_message().find("max_ingest_tokens_per_minute"),
            std::string::npos)
      << second.status.error_message();
  // An append is charged too; a small one still fits the budget.
  EXPECT_TRUE(
      client.Append("first", std::vector<int32_t>(150, 7), 128).status.ok());
  EXPECT_EQ(client.Append("first", std::vector<int32_t>(100, 7), 128)
                .status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Questions are not charged.
  EXPECT_OK(client.Ask("first", "What next?").status);
}

}  // namespace
}  // namespace twice::services
