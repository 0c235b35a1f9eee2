#include "services/common/auth.h"

#include <grpc/grpc_security_constants.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/common/log.h"
#include "services/common/tenant.h"

namespace twice::services {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxTenantLength = 64;
constexpr size_t kMaxPeerNameLength = 255;
// file_mtime_ns_ and file_size_ of a token file that does not exist.
constexpr int64_t kFileMissing = -2;

bool ValidTenant(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > kMaxTenantLength) return false;
  for (char c : tenant) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

bool ValidToken(std::string_view token) {
  if (token.size() < kMinTokenLength) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

// The token of `authorization: Bearer TOKEN`; empty when absent.
std::string BearerToken(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationMetadata);
  if (it == metadata.end()) return "";
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return "";
  }
  return std::string(absl::StripAsciiWhitespace(value.substr(kScheme.size())));
}

absl::Status Unauthenticated() {
  return absl::UnauthenticatedError(
      "missing or invalid credentials: send `authorization: Bearer TOKEN`");
}

// The entry whose token equals `token`, compared in constant time against
// every entry; nullptr when none.
const TokenEntry* FindToken(const std::vector<TokenEntry>& entries,
                            std::string_view token) {
  const TokenEntry* found = nullptr;
  for (const TokenEntry& entry : entries) {
    if (ConstantTimeEquals(entry.token, token)) found = &entry;
  }
  return found;
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer string is visited whatever the contents.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(std::string_view text) {
  std::vector<TokenEntry> entries;
  int line_number = 0;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto bad = [line_number](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_number, ": ", why));
    };
    if (fields.size() < 2 || fields.size() > 3) {
      return bad("expected `TOKEN TENANT [admin]`");
    }
    const std::string_view token(fields[0].data(), fields[0].size());
    const std::string_view tenant(fields[1].data(), fields[1].size());
    if (!ValidToken(token)) {
      return bad(absl::StrCat("a token needs at least ", kMinTokenLength,
                              " printable characters"));
    }
    if (!ValidTenant(tenant)) {
      return bad("a tenant is 1-64 characters of [A-Za-z0-9._-]");
    }
    if (fields.size() == 3 && fields[2] != "admin") {
      return bad("the third field may only be `admin`");
    }
    if (FindToken(entries, token) != nullptr) {
      return bad("the token repeats an earlier line's");
    }
    entries.push_back(
        {std::string(token), std::string(tenant), fields.size() == 3});
  }
  return entries;
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(
    AuthOptions options) {
  for (const std::string& name : options.internal_peer_names) {
    if (!ValidPeerName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--internal_peer_names: \"", name,
          "\" is not a certificate name (1-255 printable characters, no "
          "spaces or wildcards)"));
    }
  }
  if (!options.internal_token.empty() && !ValidToken(options.internal_token)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the internal token needs at least ", kMinTokenLength,
                     " printable characters"));
  }
  std::unique_ptr<Authenticator> auth(new Authenticator(std::move(options)));
  if (!auth->options_.tokens_file.empty()) {
    absl::MutexLock lock(&auth->mu_);
    absl::Status loaded = auth->Load();
    if (loaded.code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat(
          loaded.message(),
          " (--auth_tokens_file; on Kubernetes it comes from the Secret "
          "twice-tenant-tokens, see deploy/README.md)"));
    }
    if (!loaded.ok()) return loaded;
    auth->last_check_ = std::chrono::steady_clock::now();
  }
  return auth;
}

bool Authenticator::enabled() const {
  return !options_.tokens_file.empty() || !options_.internal_token.empty() ||
         !options_.internal_peer_names.empty();
}

absl::Status Authenticator::Load() {
  // Fail closed: whatever goes wrong below leaves no token valid.
  entries_.clear();
  struct stat info;
  if (stat(options_.tokens_file.c_str(), &info) != 0) {
    file_mtime_ns_ = kFileMissing;
    file_size_ = kFileMissing;
    return absl::NotFoundError(
        absl::StrCat("cannot read token file ", options_.tokens_file));
  }
  // Remember the version even when it cannot be read or parsed, so a
  // broken file is reported once, not on every call.
  file_mtime_ns_ = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 +
                   info.st_mtim.tv_nsec;
  file_size_ = static_cast<int64_t>(info.st_size);
  std::ifstream in(options_.tokens_file, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read token file ", options_.tokens_file));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::NotFoundError(
        absl::StrCat("cannot read token file ", options_.tokens_file));
  }
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(text.str());
  if (!entries.ok()) {
    return absl::Status(
        entries.status().code(),
        absl::StrCat(options_.tokens_file, ": ", entries.status().message()));
  }
  for (const TokenEntry& entry : *entries) {
    if (!options_.internal_token.empty() &&
        ConstantTimeEquals(entry.token, options_.internal_token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.tokens_file, ": a tenant token equals the internal token"));
    }
  }
  entries_ = *std::move(entries);
  return absl::OkStatus();
}

void Authenticator::MaybeReload() {
  if (options_.tokens_file.empty()) return;
  absl::MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check_ < std::chrono::seconds(1)) return;
  last_check_ = now;
  struct stat info;
  int64_t mtime_ns = kFileMissing;
  int64_t size = kFileMissing;
  if (stat(options_.tokens_file.c_str(), &info) == 0) {
    mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 +
               info.st_mtim.tv_nsec;
    size = static_cast<int64_t>(info.st_size);
  }
  if (mtime_ns == file_mtime_ns_ && size == file_size_) return;
  absl::Status loaded = Load();
  if (loaded.ok()) {
    Log(entries_.empty() ? LogLevel::kWarning : LogLevel::kInfo,
        "auth.tokens_reloaded",
        absl::StrCat("file=", LogValue(options_.tokens_file),
                     " tokens=", entries_.size()));
    return;
  }
  token_file_errors_.fetch_add(1);
  Log(LogLevel::kError, "auth.tokens_rejected",
      absl::StrCat("error=", LogValue(std::string(loaded.message())),
                   " valid_tokens=0"));
}

bool Authenticator::IsInternalPeer(const grpc::ServerContext& context) const {
  if (!options_.internal_token.empty() &&
      ConstantTimeEquals(BearerToken(context), options_.internal_token)) {
    return true;
  }
  if (options_.internal_peer_names.empty()) return false;
  // A verified certificate alone proves only that the client CA signed it;
  // public clients hold such certificates too. The identity it names must
  // be one of ours.
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return false;
  for (const char* property :
       {GRPC_PEER_DNS_PROPERTY_NAME, GRPC_PEER_URI_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      const std::string_view name(value.data(), value.size());
      for (const std::string& allowed : options_.internal_peer_names) {
        if (name == allowed) return true;
      }
    }
  }
  return false;
}

absl::StatusOr<Caller> Authenticator::AuthenticatePublic(
    const grpc::ServerContext& context) {
  if (options_.tokens_file.empty()) return Caller{kDefaultTenant, false};
  MaybeReload();
  const std::string token = BearerToken(context);
  absl::MutexLock lock(&mu_);
  const TokenEntry* entry = FindToken(entries_, token);
  if (token.empty() || entry == nullptr) return Unauthenticated();
  return Caller{entry->tenant, entry->admin};
}

absl::Status Authenticator::AuthorizeInternal(
    const grpc::ServerContext& context) {
  if (!enabled() || IsInternalPeer(context)) return absl::OkStatus();
  return absl::UnauthenticatedError(
      "internal call refused: the caller is not a Twice role (neither the "
      "internal token nor a client certificate named in "
      "--internal_peer_names)");
}

absl::Status Authenticator::AuthorizeAdmin(const grpc::ServerContext& context) {
  if (!enabled() || IsInternalPeer(context)) return absl::OkStatus();
  if (options_.tokens_file.empty()) return Unauthenticated();
  absl::StatusOr<Caller> caller = AuthenticatePublic(context);
  if (!caller.ok()) return caller.status();
  if (!caller->admin) {
    return absl::PermissionDeniedError("this call needs an admin token");
  }
  return absl::OkStatus();
}

absl::StatusOr<Caller> AuthenticatePublic(Authenticator* auth,
                                          const grpc::ServerContext& context) {
  if (auth == nullptr) return Caller{kDefaultTenant, false};
  return auth->AuthenticatePublic(context);
}

absl::Status AuthorizeInternal(Authenticator* auth,
                               const grpc::ServerContext& context) {
  if (auth == nullptr) return absl::OkStatus();
  return auth->AuthorizeInternal(context);
}

absl::Status AuthorizeAdmin(Authenticator* auth,
                            const grpc::ServerContext& context) {
  if (auth == nullptr) return absl::OkStatus();
  return auth->AuthorizeAdmin(context);
}

bool ValidPeerName(std::string_view name) {
  if (name.empty() || name.size() > kMaxPeerNameLength) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~' || c == '*') return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadInternalToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read the internal token file ", path,
        " (--internal_token_file; on Kubernetes it comes from the Secret "
        "twice-internal, see deploy/README.md)"));
  }
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view token = absl::StripAsciiWhitespace(line);
    if (!token.empty()) return std::string(token);
  }
  return absl::InvalidArgumentError(absl::StrCat(path, " holds no token"));
}

std::string NewRandomToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // RAND_bytes fails only without an entropy source; fall back to the
    // kernel's directly.
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

namespace {

class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* value) : value_(value) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert(
          {kAuthorizationMetadata, *value_});
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;  // owned by the factory, which outlives calls
};

class BearerTokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string token)
      : value_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>
NewBearerTokenInterceptorFactory(std::string token) {
  return std::make_unique<BearerTokenInterceptorFactory>(std::move(token));
}

}  // namespace twice::services
