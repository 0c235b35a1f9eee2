// Reading a server's Prometheus endpoint in tests: where it listens (from
// the server's log), the page, and one sample of it.
#ifndef TWICE_TESTS_TESTING_METRICS_SCRAPE_H_
#define TWICE_TESTS_TESTING_METRICS_SCRAPE_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <sstream>
#include <string>

namespace twice::testing {

// The port of the server's "event=metrics.started ... port=N" log line in
// `log`; -1 if there is none.
inline int MetricsPort(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("event=metrics.started") == std::string::npos) continue;
    const size_t at = line.find(" port=");
    if (at == std::string::npos) continue;
    return std::atoi(line.c_str() + at + 6);
  }
  return -1;
}

// GET http://127.0.0.1:port/path; the body, or empty on failure.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path +
                                " HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                                "Connection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
        response.append(buffer, n);
      }
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The value of the sample `series` (a name, with its labels as the page
// writes them, e.g. `x_total{outcome="a"}`) in Prometheus text format; -1
// if absent.
inline double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() &&
        line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

}  // namespace twice::testing

#endif  // TWICE_TESTS_TESTING_METRICS_SCRAPE_H_
