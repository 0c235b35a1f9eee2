// Content addresses of stored states (design §5).
//
//   k0 = SHA-256("twice-root-v1" | fingerprint | mode | tenant)
//   k_i = SHA-256("twice-chain-v1" | k_{i-1} | token ids of segment i)
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

  friend bool operator==(const StateKey&, const StateKey&) = default;
};

// Root of a chain: the empty state of `fingerprint` read in `mode` by `tenant`.
StateKey RootKey(std::string_view fingerprint, std::string_view mode,
                 std::string_view tenant);
// Key of the state after reading `tokens` from the state named `parent`.
StateKey ChainKey(const StateKey& parent, absl::Span<const int32_t> tokens);

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STATE_KEY_H_
