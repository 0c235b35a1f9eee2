// Content addresses of stored states (design §5).
//
//   k0 = SHA-256("twice-root-v1" | fingerprint | mode | tenant)
//   k_i = SHA-256("twice-chain-v1" | k_{i-1} | token ids of segment i)
//   block j of a chunked state K (block_manifest.h):
//       SHA-256("twice-block-v1" | K | le64 j)
//
// Strings are length-prefixed (little-endian uint64 byte count) and token ids
// are little-endian int32, so no two different inputs hash the same byte
// stream; state_key.cc spells out the exact bytes. Identical prefixes under
// the same model, mode and tenant therefore share keys.
#ifndef TWICE_STORAGE_STATE_KEY_H_
#define TWICE_STORAGE_STATE_KEY_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::storage {

struct StateKey {
  std::array<uint8_t, 32> digest{};

  std::string Hex() const;
  std::string_view Bytes() const {
    return {reinterpret_cast<const char*>(digest.data()), digest.size()};
  }
  // Parses 32 raw bytes; INVALID_ARGUMENT otherwise.
  [[nodiscard]] static absl::StatusOr<StateKey> FromBytes(
      std::string_view bytes);
  // Parses what Hex() writes (64 hex digits, either case);
  // INVALID_ARGUMENT otherwise.
  [[nodiscard]] static absl::StatusOr<StateKey> FromHex(std::string_view hex);

  friend bool operator==(const StateKey&, const StateKey&) = default;
};

// Root of a chain: the empty state of `fingerprint` read in `mode` by `tenant`.
StateKey RootKey(std::string_view fingerprint, std::string_view mode,
                 std::string_view tenant);
// Key of the state after reading `tokens` from the state named `parent`.
StateKey ChainKey(const StateKey& parent, absl::Span<const int32_t> tokens);
// Key of block `index` written by the chunked state `state`.
StateKey BlockKey(const StateKey& state, uint64_t index);

// Hash support so keys can index in-memory maps (the digest is already
// uniform, so its first 8 bytes are the hash).
struct StateKeyHash {
  size_t operator()(const StateKey& key) const {
    size_t h = 0;
    for (size_t i = 0; i < sizeof(h); ++i) h = (h << 8) | key.digest[i];
    return h;
  }
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_KEY_H_
