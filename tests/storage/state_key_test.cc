#include "storage/state_key.h"

#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

// Known answers computed independently of this code with:
//
//   /usr/bin/python3 -c "
//   import hashlib,struct
//   lp=lambda s: struct.pack('<Q',len(s))+s
//   r=hashlib.sha256(lp(b'twice-root-v1')+lp(b'fp-0123')+lp(b'recurrent')
//                    +lp(b'acme')).digest()
//   print(r.hex())
//   print(hashlib.sha256(lp(b'twice-chain-v1')+r
//                        +struct.pack('<3i',1,2,-3)).hexdigest())"
constexpr char kRootHex[] =
    "36640ccf7584384d32049182b7400e2bc16b00f519e2f5649a2e6605e9ea5843";
constexpr char kChainHex[] =
    "f3b2bf606e65ce55fb7b360970511556eae2209ceb8c3ef7fdb49942768a936e";

TEST(StateKeyTest, RootKeyMatchesIndependentSha256) {
  EXPECT_EQ(RootKey("fp-0123", "recurrent", "acme").Hex(), kRootHex);
}

TEST(StateKeyTest, ChainKeyMatchesIndependentSha256) {
  const std::vector<int32_t> tokens = {1, 2, -3};
  EXPECT_EQ(ChainKey(RootKey("fp-0123", "recurrent", "acme"), tokens).Hex(),
            kChainHex);
}

TEST(StateKeyTest, HexIsLowercaseAndBytesRoundTrip) {
  const StateKey key = RootKey("fp", "recurrent", "t");
  const std::string hex = key.Hex();
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);

  absl::StatusOr<StateKey> parsed = StateKey::FromBytes(key.Bytes());
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, key);
}

TEST(StateKeyTest, FromBytesRejectsWrongLength) {
  for (size_t n : {0, 1, 31, 33, 64}) {
    const std::string bytes(n, 'x');
    EXPECT_EQ(StateKey::FromBytes(bytes).status().code(),
              absl::StatusCode::kInvalidArgument)
        << n;
  }
}

TEST(StateKeyTest, ChainIsDeterministic) {
  const std::vector<int32_t> first = {10, 20, 30};
  const std::vector<int32_t> second = {40, 50};
  const StateKey a =
      ChainKey(ChainKey(RootKey("fp", "recurrent", "t"), first), second);
  const StateKey b =
      ChainKey(ChainKey(RootKey("fp", "recurrent", "t"), first), second);
  EXPECT_EQ(a, b);
}

TEST(StateKeyTest, EveryInputChangesTheKey) {
  const StateKey root = RootKey("fp", "recurrent", "t");
  EXPECT_NE(root, RootKey("fp2", "recurrent", "t"));
  EXPECT_NE(root, RootKey("fp", "prefix", "t"));
  EXPECT_NE(root, RootKey("fp", "recurrent", "u"));
  // Length prefixes: moving a byte across a field boundary changes the key.
  EXPECT_NE(RootKey("ab", "c", "t"), RootKey("a", "bc", "t"));
  EXPECT_NE(RootKey("fp", "", "t"), RootKey("fp", "t", ""));

  const std::vector<int32_t> tokens = {1, 2, 3};
  const StateKey chained = ChainKey(root, tokens);
  EXPECT_NE(chained, root);
  EXPECT_NE(chained, ChainKey(root, std::vector<int32_t>{1, 2, 4}));
  EXPECT_NE(chained, ChainKey(root, std::vector<int32_t>{3, 2, 1}));
  EXPECT_NE(chained, ChainKey(root, std::vector<int32_t>{1, 2}));
  EXPECT_NE(chained, ChainKey(RootKey("fp", "recurrent", "u"), tokens));
  // Where the segments split is part of the name.
  EXPECT_NE(chained, ChainKey(ChainKey(root, std::vector<int32_t>{1, 2}),
                              std::vector<int32_t>{3}));
  // An empty segment still moves to a new key.
  EXPECT_NE(ChainKey(root, {}), root);
}

TEST(StateKeyTest, LongSegmentsHashAllTokens) {
  // Past the 4096-token hashing chunk, the last token still matters.
  std::vector<int32_t> tokens(10000, 7);
  const StateKey root = RootKey("fp", "recurrent", "t");
  const StateKey a = ChainKey(root, tokens);
  tokens.back() = 8;
  EXPECT_NE(a, ChainKey(root, tokens));
}

}  // namespace
}  // namespace twice::storage
