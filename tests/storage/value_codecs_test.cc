#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "storage/blob_envelope.h"
#include "storage/state_value.h"
#include "storage/token_codec.h"

namespace twice::storage {
namespace {

TEST(TokenCodecTest, RoundTrip) {
  for (const std::vector<int32_t>& tokens :
       {std::vector<int32_t>{}, std::vector<int32_t>{0},
        std::vector<int32_t>{1, -1, std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min(), 50256}}) {
    absl::StatusOr<std::vector<int32_t>> decoded =
        DecodeTokens(EncodeTokens(tokens));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, tokens);
  }
}

TEST(TokenCodecTest, IdsAreLittleEndianInt32) {
  const std::vector<int32_t> tokens = {0x01020304, -2};
  const std::string sealed = EncodeTokens(tokens);
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(sealed, BlobKind::kTokens);
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(*payload, std::string_view("\x04\x03\x02\x01\xfe\xff\xff\xff", 8));
}

TEST(TokenCodecTest, PartialIdIsDataLoss) {
  const std::string_view parts[] = {"\x01\x02\x03\x04\x05"};
  EXPECT_EQ(
      DecodeTokens(SealEnvelope(BlobKind::kTokens, parts)).status().code(),
      absl::StatusCode::kDataLoss);
}

TEST(StateValueTest, RoundTrip) {
  const std::string blob = std::string("state\0bytes", 11);
  // The decoded blob is a view into `stored`, which must outlive it.
  const std::string stored = EncodeStateValue(blob, 512, 1700000000000);
  absl::StatusOr<StateValue> value = DecodeStateValue(stored);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->blob, blob);
  EXPECT_EQ(value->recompute_tokens, 512);
  EXPECT_EQ(value->written_unix_ms, 1700000000000);
}

TEST(StateValueTest, ShortHeaderAndNegativeFieldsAreDataLoss) {
  const std::string_view short_parts[] = {"12345678"};
  EXPECT_EQ(DecodeStateValue(SealEnvelope(BlobKind::kState, short_parts))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStateValue(EncodeStateValue("x", -1, 0)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateValueTest, OtherKindsAreDataLoss) {
  EXPECT_EQ(DecodeStateValue(EncodeTokens(std::vector<int32_t>{1, 2, 3, 4}))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeStateIndex(EncodeStateValue("x", 1, 2)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateIndexTest, RoundTripAndSizeCheck) {
  const StateIndexEntry entry{.stored_bytes = 20 << 20,
                              .recompute_tokens = 4096,
                              .written_unix_ms = 99};
  absl::StatusOr<StateIndexEntry> decoded =
      DecodeStateIndex(EncodeStateIndex(entry));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->stored_bytes, entry.stored_bytes);
  EXPECT_EQ(decoded->recompute_tokens, entry.recompute_tokens);
  EXPECT_EQ(decoded->written_unix_ms, entry.written_unix_ms);

  const std::string_view parts[] = {std::string_view("0123456789abcdef")};
  EXPECT_EQ(DecodeStateIndex(SealEnvelope(BlobKind::kStateIndex, parts))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace twice::storage
