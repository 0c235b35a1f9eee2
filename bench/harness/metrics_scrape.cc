#include "bench/harness/metrics_scrape.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace twice::bench {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on `fd` until `deadline`; false on timeout or error.
bool Wait(int fd, short events,
          std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd, events, 0};
  return poll(&p, 1, static_cast<int>(left.count())) == 1;
}

absl::StatusOr<std::string> HttpGet(const std::string& address,
                                    const std::string& path,
                                    std::chrono::milliseconds timeout) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port"));
  }
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", address));
  }
  Fd fd(socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK, 0));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int rc =
      fd.get() < 0 ? -1 : connect(fd.get(), found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && errno != EINPROGRESS) {
    return absl::UnavailableError(
        absl::StrCat("connect ", address, ": ", std::strerror(errno)));
  }
  int error = 0;
  socklen_t error_len = sizeof(error);
  if (!Wait(fd.get(), POLLOUT, deadline) ||
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &error_len) != 0 ||
      error != 0) {
    return absl::UnavailableError(absl::StrCat(
        "connect ", address, ": ", error ? std::strerror(error) : "timed out"));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    if (!Wait(fd.get(), POLLOUT, deadline)) {
      return absl::UnavailableError(absl::StrCat("send to ", address));
    }
    const ssize_t n = send(fd.get(), request.data() + sent,
                           request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) {
      return absl::UnavailableError(absl::StrCat("send to ", address));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[16384];
  while (true) {
    if (!Wait(fd.get(), POLLIN, deadline)) {
      return absl::UnavailableError(absl::StrCat("read from ", address));
    }
    const ssize_t n = recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n == 0) break;  // HTTP/1.0: the server closes after the body
    if (n < 0) {
      if (errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("read from ", address));
    }
    response.append(buffer, static_cast<size_t>(n));
  }
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos ||
      response.find(" 200") > response.find("\r\n")) {
    return absl::UnavailableError(
        absl::StrCat("GET http://", address, path, ": not an HTTP 200 reply"));
  }
  return response.substr(body + 4);
}

}  // namespace

absl::StatusOr<double> ScrapeMetric(const std::string& address,
                                    const std::string& metric,
                                    std::chrono::milliseconds timeout) {
  absl::StatusOr<std::string> body = HttpGet(address, "/metrics", timeout);
  if (!body.ok()) return body.status();
  for (absl::string_view line : absl::StrSplit(*body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (line.size() <= metric.size() || line.substr(0, metric.size()) != metric)
      continue;
    const char next = line[metric.size()];
    if (next != ' ' && next != '{') continue;
    // "name{labels} value [timestamp]" or "name value [timestamp]".
    const size_t space =
        line.find(' ', line.find('}') == std::string::npos ? metric.size()
                                                           : line.find('}'));
    if (space == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(space + 1);
    rest = rest.substr(0, rest.find(' '));
    double value = 0;
    if (absl::SimpleAtod(rest, &value)) return value;
  }
  return absl::NotFoundError(
      absl::StrCat("http://", address, "/metrics exports no ", metric));
}

}  // namespace twice::bench
