#include "services/common/tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace twice::services {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options) {
  if (!options.server_tls()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadTextFile(options.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadTextFile(options.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl(
      options.client_ca_file.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!options.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadTextFile(options.client_ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const TlsOptions& options) {
  if (options.ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadTextFile(options.ca_file);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!options.cert_file.empty() && !options.key_file.empty()) {
    absl::StatusOr<std::string> cert = ReadTextFile(options.cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadTextFile(options.key_file);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

bool IsLoopbackListen(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  std::string_view host =
      colon == std::string_view::npos ? listen : listen.substr(0, colon);
  if (host == "localhost" || host == "[::1]" || host == "::1") return true;
  // 127.0.0.0/8: four dotted decimal parts, the first 127.
  if (host.substr(0, 4) != "127.") return false;
  int parts = 2;  // "127" and the first after it
  for (char c : host.substr(4)) {
    if (c == '.') {
      ++parts;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return parts == 4;
}

}  // namespace twice::services
