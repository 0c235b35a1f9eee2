#include "services/common/sha256.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"

namespace twice::services {

std::string HexSha256(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

}  // namespace twice::services
