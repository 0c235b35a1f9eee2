// TLS for Twice's gRPC listeners and channels: PEM files named by flags
// turned into gRPC credentials (Debian's gRPC 1.51 SSL credentials).
//
// - A server with a certificate and key serves TLS; with a client CA as
//   well it requires and verifies client certificates (mTLS).
// - A channel with trust roots (a CA file) speaks TLS and, when a
//   certificate and key are given, presents them as its client
//   certificate; without trust roots it is plaintext.
// - Plaintext listening is for loopback addresses (IsLoopbackListen) unless
//   explicitly allowed; ServerOptions::Validate enforces that.
#ifndef TWICE_SERVICES_COMMON_TLS_H_
#define TWICE_SERVICES_COMMON_TLS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace twice::services {

struct TlsOptions {
  // PEM certificate chain and private key of this process: the server's
  // certificate, and the client certificate of outgoing calls. Default:
  // empty (no TLS listener, no client certificate).
  std::string cert_file;
  std::string key_file;
  // PEM CA that client certificates must chain to; non-empty = mTLS.
  // Default: empty.
  std::string client_ca_file;
  // PEM trust roots for outgoing calls; non-empty = outgoing calls use TLS.
  // Default: empty (plaintext).
  std::string ca_file;

  bool server_tls() const { return !cert_file.empty(); }
};

// Credentials of a listener: TLS (mTLS with client_ca_file) when cert_file
// is set, else insecure. NOT_FOUND when a file cannot be read.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>>
MakeServerCredentials(const TlsOptions& options);
// Credentials of an outgoing channel: TLS when ca_file is set, else
// insecure.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const TlsOptions& options);

// True when the host of `listen` (host:port) is a loopback address:
// localhost, 127.0.0.0/8 or [::1].
bool IsLoopbackListen(std::string_view listen);

// The whole content of a file; NOT_FOUND when it cannot be read.
[[nodiscard]] absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_TLS_H_
