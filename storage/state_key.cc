// Chain keys. The hashed byte streams are, exactly:
//
//   root:  lp("twice-root-v1") lp(fingerprint) lp(mode) lp(tenant)
//   chain: lp("twice-chain-v1") parent[32] le32(t_0) le32(t_1) ...
//   block: lp("twice-block-v1") state[32] le64(index)
//
// where lp(s) = le64(byte length of s) followed by s. The domain strings keep
// a root stream from ever equalling a chain stream; the length prefixes keep
// ("ab", "c") apart from ("a", "bc"). The token list needs no count: it runs
// to the end of the stream and every id is 4 bytes. Changing any of this
// renames every stored state, so it is versioned by the domain strings.
#include "storage/state_key.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "storage/absl_view.h"
#include "storage/byte_io.h"

namespace twice::storage {
namespace {

constexpr std::string_view kRootDomain = "twice-root-v1";
constexpr std::string_view kChainDomain = "twice-chain-v1";
constexpr std::string_view kBlockDomain = "twice-block-v1";

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// SHA-256 with OpenSSL's EVP interface. It can only fail when OpenSSL cannot
// allocate, which no caller could recover from either; keys are not allowed
// to be wrong, so the process stops rather than returning a bogus digest.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    Check(ctx_ != nullptr &&
          EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
  }

  void Update(std::string_view bytes) {
    Check(EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) == 1);
  }

  void UpdateLengthPrefixed(std::string_view s) {
    std::string prefix;
    AppendU64(prefix, s.size());
    Update(prefix);
    Update(s);
  }

  StateKey Finish() {
    StateKey key;
    unsigned int size = 0;
    Check(EVP_DigestFinal_ex(ctx_.get(), key.digest.data(), &size) == 1 &&
          size == key.digest.size());
    return key;
  }

 private:
  static void Check(bool ok) {
    if (!ok) {
      std::fprintf(stderr, "twice: OpenSSL SHA-256 failed\n");
      std::abort();
    }
  }

  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx_;
};

}  // namespace

std::string StateKey::Hex() const {
  return absl::BytesToHexString(AbslView(Bytes()));
}

absl::StatusOr<StateKey> StateKey::FromBytes(std::string_view bytes) {
  StateKey key;
  if (bytes.size() != key.digest.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state key must be ", key.digest.size(), " bytes, got ", bytes.size()));
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    key.digest[i] = static_cast<uint8_t>(bytes[i]);
  }
  return key;
}

absl::StatusOr<StateKey> StateKey::FromHex(std::string_view hex) {
  StateKey key;
  if (hex.size() != 2 * key.digest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("state key must be ", 2 * key.digest.size(),
                     " hex digits, got ", hex.size(), " characters"));
  }
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < key.digest.size(); ++i) {
    const int high = digit(hex[2 * i]);
    const int low = digit(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("state key holds a character that is not a hex digit "
                       "at position ",
                       high < 0 ? 2 * i : 2 * i + 1));
    }
    key.digest[i] = static_cast<uint8_t>(high * 16 + low);
  }
  return key;
}

StateKey RootKey(std::string_view fingerprint, std::string_view mode,
                 std::string_view tenant) {
  Sha256 sha;
  sha.UpdateLengthPrefixed(kRootDomain);
  sha.UpdateLengthPrefixed(fingerprint);
  sha.UpdateLengthPrefixed(mode);
  sha.UpdateLengthPrefixed(tenant);
  return sha.Finish();
}

StateKey ChainKey(const StateKey& parent, absl::Span<const int32_t> tokens) {
  Sha256 sha;
  sha.UpdateLengthPrefixed(kChainDomain);
  sha.Update(parent.Bytes());
  // Hash in bounded chunks so a long segment needs no second full copy.
  constexpr size_t kChunkTokens = 4096;
  std::string chunk;
  chunk.reserve(kChunkTokens * 4);
  for (size_t begin = 0; begin < tokens.size(); begin += kChunkTokens) {
    chunk.clear();
    const size_t end = std::min(tokens.size(), begin + kChunkTokens);
    for (size_t i = begin; i < end; ++i) {
      AppendU32(chunk, static_cast<uint32_t>(tokens[i]));
    }
    sha.Update(chunk);
  }
  return sha.Finish();
}

StateKey BlockKey(const StateKey& state, uint64_t index) {
  Sha256 sha;
  sha.UpdateLengthPrefixed(kBlockDomain);
  sha.Update(state.Bytes());
  std::string le_index;
  AppendU64(le_index, index);
  sha.Update(le_index);
  return sha.Finish();
}

}  // namespace twice::storage
