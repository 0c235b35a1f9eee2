#include "services/common/metrics_http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace twice::services {
namespace {

constexpr size_t kMaxRequestBytes = 8 * 1024;
constexpr int kIoTimeoutSeconds = 5;

// "host:port" / "[v6]:port" -> (host, port); host may be empty (any).
bool SplitHostPort(const std::string& listen, std::string& host,
                   std::string& port) {
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find("]:");
    if (close == std::string::npos) return false;
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string::npos) return false;
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  if (port.empty()) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

void SendAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // peer gone or timed out: nothing to do
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void Respond(int fd, absl::string_view status, absl::string_view type,
             absl::string_view body, bool head) {
  SendAll(fd, absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type,
                           "\r\nContent-Length: ", body.size(),
                           "\r\nConnection: close\r\n\r\n"));
  if (!head) SendAll(fd, body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen) {
  std::string host, port;
  if (!SplitHostPort(listen, host, port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics listen address \"", listen, "\" is not host:port"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                port.c_str(), &hints, &found);
  if (gai != 0) {
    return absl::UnavailableError(absl::StrCat("metrics endpoint on ", listen,
                                               ": ", ::gai_strerror(gai)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      break;
    }
    error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint on ", listen, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError("metrics endpoint: pipe: " + why);
  }
  std::unique_ptr<MetricsHttpServer> server(
      new MetricsHttpServer(fd, wake[0], wake[1], bound_port));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read,
                                     int wake_write, int port)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port) {}

MetricsHttpServer::~MetricsHttpServer() {
  const char stop = 1;
  while (::write(wake_write_, &stop, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
}

void MetricsHttpServer::RegisterCollectable(
    std::weak_ptr<prometheus::Collectable> collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  collectables_.push_back(std::move(collectable));
}

void MetricsHttpServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;  // e.g. the peer gave up already
    Answer(client);
    ::close(client);
  }
}

void MetricsHttpServer::Answer(int fd) {
  timeval timeout{kIoTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::string request;
  char buffer[2048];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      Respond(fd, "400 Bad Request", "text/plain", "request too large\n",
              false);
      return;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed or timed out before a whole request
    request.append(buffer, static_cast<size_t>(n));
  }
  const absl::string_view line =
      absl::string_view(request).substr(0, request.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == absl::string_view::npos ? absl::string_view::npos
                                                    : line.find(' ', sp1 + 1);
  if (sp2 == absl::string_view::npos ||
      line.substr(sp2 + 1).substr(0, 5) != "HTTP/") {
    Respond(fd, "400 Bad Request", "text/plain", "not an HTTP request\n",
            false);
    return;
  }
  const absl::string_view method = line.substr(0, sp1);
  absl::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    Respond(fd, "405 Method Not Allowed", "text/plain", "GET /metrics\n",
            false);
    return;
  }
  if (path != "/metrics") {
    Respond(fd, "404 Not Found", "text/plain", "GET /metrics\n", head);
    return;
  }
  Respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", Scrape(),
          head);
}

std::string MetricsHttpServer::Scrape() {
  std::vector<prometheus::MetricFamily> families;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = collectables_.begin(); it != collectables_.end();) {
      std::shared_ptr<prometheus::Collectable> c = it->lock();
      if (c == nullptr) {
        it = collectables_.erase(it);
        continue;
      }
      std::vector<prometheus::MetricFamily> some = c->Collect();
      families.insert(families.end(), std::make_move_iterator(some.begin()),
                      std::make_move_iterator(some.end()));
      ++it;
    }
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace twice::services
