// The /metrics HTTP server on a real socket: a scrape returns the
// registered collectables in Prometheus text format, other paths and
// methods get 404 / 405, garbage gets 400, HEAD gets headers only, a
// collectable that went away is dropped, and bad or taken addresses fail
// cleanly.
#include "services/common/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "tests/testing/grpc_status_matchers.h"

namespace twice::services {
namespace {

// Sends `request` raw and returns the whole response.
std::string Exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::write(fd, request.data(), request.size()) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) {
      response.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return response;
}

std::string Get(int port, const std::string& path) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter()
        .Name("twice_test_things_total")
        .Help("Things counted by the test")
        .Register(*registry_)
        .Add({})
        .Increment(3);
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
        MetricsHttpServer::Start("127.0.0.1:0");
    ASSERT_OK(server);
    server_ = *std::move(server);
    server_->RegisterCollectable(registry_);
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpServerTest, ScrapeReturnsTheTextFormat) {
  ASSERT_GT(server_->port(), 0);
  const std::string response = Get(server_->port(), "/metrics");
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << response;
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"),
            std::string::npos);
  EXPECT_NE(response.find("\ntwice_test_things_total 3"), std::string::npos)
      << response;
  const size_t body = response.find("\r\n\r\n") + 4;
  EXPECT_NE(response.find("Content-Length: " +
                          std::to_string(response.size() - body)),
            std::string::npos);
  // A query string is ignored; HTTP/1.0 works too.
  EXPECT_NE(Exchange(server_->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n")
                .find("twice_test_things_total 3"),
            std::string::npos);
}

TEST_F(MetricsHttpServerTest, OtherRequestsGetClearStatuses) {
  EXPECT_EQ(Get(server_->port(), "/").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Exchange(server_->port(), "POST /metrics HTTP/1.1\r\n\r\n")
                .rfind("HTTP/1.1 405", 0),
            0u);
  EXPECT_EQ(Exchange(server_->port(), "hello\r\n\r\n").rfind("HTTP/1.1 400", 0),
            0u);
  EXPECT_EQ(Exchange(server_->port(),
                     "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a'))
                .rfind("HTTP/1.1 400", 0),
            0u);
  const std::string head =
      Exchange(server_->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(head.find("twice_test_things_total"), std::string::npos);
  // The server still answers after all that.
  EXPECT_NE(Get(server_->port(), "/metrics").find("twice_test_things_total"),
            std::string::npos);
}

TEST_F(MetricsHttpServerTest, ConcurrentScrapesAllSucceed) {
  std::vector<std::thread> clients;
  std::vector<std::string> responses(8);
  for (size_t i = 0; i < responses.size(); ++i) {
    clients.emplace_back(
        [&, i] { responses[i] = Get(server_->port(), "/metrics"); });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& r : responses) {
    EXPECT_NE(r.find("twice_test_things_total 3"), std::string::npos);
  }
}

TEST_F(MetricsHttpServerTest, ExpiredCollectablesAreDropped) {
  registry_.reset();
  const std::string response = Get(server_->port(), "/metrics");
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(response.find("twice_test_things_total"), std::string::npos);
}

TEST(MetricsHttpServerStartTest, BadAndTakenAddressesFailCleanly) {
  EXPECT_EQ(MetricsHttpServer::Start("no-port").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1:http").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> first =
      MetricsHttpServer::Start("127.0.0.1:0");
  ASSERT_OK(first);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Start("127.0.0.1:" + std::to_string((*first)->port()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("metrics endpoint"),
            std::string::npos);
}

}  // namespace
}  // namespace twice::services
