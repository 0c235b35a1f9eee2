// Who a call comes from: bearer tokens mapped to tenants, admin rights, and
// the trust between Twice's own roles.
//
// Trust model (docs/SECURITY.md has the whole picture)
// -----------
// - Public calls (twice.v1.Orchestrator) carry `authorization: Bearer TOKEN`
//   metadata. The token file (--auth-tokens-file) maps each token to one
//   tenant, optionally with admin rights. The caller's tenant scopes every
//   document record and state key it touches, so a tenant sees only its
//   own documents; another tenant's id answers NOT_FOUND exactly like a
//   missing one. Without a token file every caller is tenant "default". A
//   client certificate never names a tenant: under mTLS a public caller
//   still needs its bearer token.
// - Internal calls (twice.v1.Prefill, twice.v1.Decode, and the data RPCs of
//   twice.v1.Store) name the tenant in the request message itself (the
//   orchestrator copies the authenticated caller's tenant there). That field
//   is trusted only from an internal peer, recognised explicitly:
//     * it presents the internal token (`authorization: Bearer
//       INTERNAL_TOKEN`, from --internal-token-file, or generated at startup
//       for role all, whose orchestrator calls its own prefill and decode in
//       process), or
//     * its client certificate, verified by the listener's client CA, names
//       in its subject alternative names (DNS or URI, e.g.
//       `spiffe://twice/role/prefill`) one of --internal-peer-names.
//   A certificate from the client CA without such a name is a public
//   caller's. Other callers of internal RPCs get UNAUTHENTICATED.
// - Admin calls (Store Stats, Verify, Compact, Gc, Backup) need a token
//   marked `admin` in the token file, or an internal peer; a tenant token
//   without it gets PERMISSION_DENIED.
// - When none of token file, internal token and internal peer names is
//   configured, authentication is off: every call is allowed, as tenant
//   "default". ServerOptions::Validate keeps such a process on loopback for
//   the internal roles.
//
// Tokens are compared in constant time against every entry and never
// logged. The token file is re-read when its modification time or size
// changes, checked at most once a second when a call needs it. It fails
// closed: a file that was deleted, emptied, cannot be read or no longer
// parses leaves no tenant token valid (every public call UNAUTHENTICATED)
// until it is fixed; each such reload is logged and counted
// (token_file_errors()), and never widens access.
//
// Thread safety: an Authenticator is safe to share between threads.
#ifndef TWICE_SERVICES_COMMON_AUTH_H_
#define TWICE_SERVICES_COMMON_AUTH_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/client_interceptor.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace twice::services {

inline constexpr char kAuthorizationMetadata[] = "authorization";

// One line of the token file: `TOKEN TENANT [admin]`.
struct TokenEntry {
  std::string token;
  std::string tenant;
  bool admin = false;
};

// Parses a token file's text. Blank lines and `#` comments are skipped.
// Tokens must be at least 16 printable characters and unique; tenants use
// [A-Za-z0-9._-], at most 64 characters. INVALID_ARGUMENT names the line
// (never the token) on any error.
[[nodiscard]] absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(
    std::string_view text);

struct AuthOptions {
  // Token file; empty = public calls are not authenticated and act as
  // tenant "default". Default: empty.
  std::string tokens_file;
  // The secret internal peers present; empty = none. Default: empty.
  std::string internal_token;
  // Subject alternative names (DNS names or URIs, compared exactly) of the
  // client certificates that identify internal peers; only meaningful on a
  // listener that verifies client certificates (mTLS). Default: none.
  std::vector<std::string> internal_peer_names;
};

// The authenticated caller of a public call.
struct Caller {
  std::string tenant;
  bool admin = false;
};

class Authenticator {
 public:
  // Reads the token file once; INVALID_ARGUMENT / NOT_FOUND when it is
  // missing or malformed.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Authenticator>> Create(
      AuthOptions options);

  // True when any of the three mechanisms is configured.
  bool enabled() const;
  // Reloads of the token file that failed (missing, unreadable, malformed)
  // since startup; each left no tenant token valid.
  int64_t token_file_errors() const { return token_file_errors_.load(); }

  // Public RPCs: the caller's tenant. UNAUTHENTICATED for a missing or
  // unknown bearer token when a token file is configured.
  [[nodiscard]] absl::StatusOr<Caller> AuthenticatePublic(
      const grpc::ServerContext& context);
  // Internal RPCs: OK for an internal peer (or when auth is off), else
  // UNAUTHENTICATED.
  [[nodiscard]] absl::Status AuthorizeInternal(
      const grpc::ServerContext& context);
  // Admin RPCs: OK for an admin token or an internal peer (or when auth is
  // off); PERMISSION_DENIED for a valid non-admin token; UNAUTHENTICATED
  // otherwise.
  [[nodiscard]] absl::Status AuthorizeAdmin(const grpc::ServerContext& context);

 private:
  explicit Authenticator(AuthOptions options) : options_(std::move(options)) {}
  bool IsInternalPeer(const grpc::ServerContext& context) const;
  // Reloads the token file when it changed (at most one check a second).
  void MaybeReload() ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] absl::Status Load() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AuthOptions options_;
  absl::Mutex mu_;
  std::vector<TokenEntry> entries_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_check_ ABSL_GUARDED_BY(mu_);
  int64_t file_mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t file_size_ ABSL_GUARDED_BY(mu_) = -1;
  std::atomic<int64_t> token_file_errors_{0};
};

// The three checks for services that may run without an authenticator
// (nullptr = auth off: tenant "default", everything allowed).
[[nodiscard]] absl::StatusOr<Caller> AuthenticatePublic(
    Authenticator* auth, const grpc::ServerContext& context);
[[nodiscard]] absl::Status AuthorizeInternal(
    Authenticator* auth, const grpc::ServerContext& context);
[[nodiscard]] absl::Status AuthorizeAdmin(Authenticator* auth,
                                          const grpc::ServerContext& context);

// True when `a` equals `b`; the time taken depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// True when `name` may be an internal peer name: 1-255 printable
// characters, no spaces, no wildcard.
bool ValidPeerName(std::string_view name);

// Reads a secret token file: its first non-blank line, trimmed.
[[nodiscard]] absl::StatusOr<std::string> ReadInternalToken(
    const std::string& path);
// 32 random bytes as 64 hex digits.
std::string NewRandomToken();

// Client interceptor factory that adds `authorization: Bearer TOKEN` to
// every call of a channel (the internal token on internal channels).
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>
NewBearerTokenInterceptorFactory(std::string token);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_AUTH_H_
