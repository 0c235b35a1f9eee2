#include "engine/models/fingerprint.h"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace twice::engine {
namespace {

struct CtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    ok_ = ctx_ != nullptr &&
          EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }
  void Raw(const void* data, size_t n) {
    if (ok_ && n > 0) ok_ = EVP_DigestUpdate(ctx_.get(), data, n) == 1;
  }
  void Field(std::string_view bytes) {
    const uint64_t n = bytes.size();
    Raw(&n, sizeof(n));
    Raw(bytes.data(), bytes.size());
  }
  absl::StatusOr<std::string> HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), digest, &len) != 1) {
      return absl::InternalError("SHA-256 failed");
    }
    return absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(digest), len));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, CtxDeleter> ctx_;
  bool ok_ = false;
};

}  // namespace

absl::StatusOr<std::string> ModelFingerprint(std::string_view architecture,
                                             std::string_view canonical_config,
                                             const WeightMap& weights,
                                             std::string_view tokenizer_json,
                                             std::string_view state_dtype) {
  Sha256 sha;
  sha.Field(architecture);
  sha.Field(canonical_config);
  const uint64_t count = weights.tensors().size();
  sha.Raw(&count, sizeof(count));
  for (const auto& [name, stored] : weights.tensors()) {
    sha.Field(name);
    sha.Field(stored.entry->dtype_name);
    const uint64_t rank = stored.entry->shape.size();
    sha.Raw(&rank, sizeof(rank));
    for (int64_t d : stored.entry->shape) sha.Raw(&d, sizeof(d));
    const auto bytes = stored.file->Bytes(*stored.entry);
    sha.Field(std::string_view(reinterpret_cast<const char*>(bytes.data()),
                               bytes.size()));
  }
  sha.Field(tokenizer_json);
  sha.Field(state_dtype);
  // A load that converts matrices computes something else than the stored
  // weights do. Loads as stored add nothing, so states made before the
  // dtype was part of the fingerprint stay valid.
  if (const std::optional<DType> to = weights.matrix_dtype()) {
    bool converts = false;
    for (const auto& [name, stored] : weights.tensors()) {
      converts = converts || stored.entry->dtype != to;
    }
    // int8 names its format too: an older int8 (one scale per row, f32
    // inputs) computed other numbers, and its states must not be resumed
    // by this one.
    if (converts) {
      sha.Field(absl::StrCat(
          "weights_dtype=", std::string(DTypeFlagName(*to)),
          *to == DType::kI8
              ? absl::StrCat("/blocks", kernels::kI8Block, "/int16-inputs")
              : std::string()));
    }
  }
  return sha.HexDigest();
}

}  // namespace twice::engine
