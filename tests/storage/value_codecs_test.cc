#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "storage/blob_envelope.h"
#include "storage/block_manifest.h"
#include "storage/byte_io.h"
#include "storage/record_validation.h"
#include "storage/state_ref.h"
#include "storage/state_value.h"
#include "storage/token_codec.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

TEST(TokenCodecTest, RoundTrip) {
  for (const std::vector<int32_t>& tokens :
       {std::vector<int32_t>{}, std::vector<int32_t>{0},
        std::vector<int32_t>{1, -1, std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min(), 50256}}) {
    absl::StatusOr<std::vector<int32_t>> decoded =
        DecodeTokens(EncodeTokens(tokens));
    ASSERT_OK(decoded);
    EXPECT_EQ(*decoded, tokens);
  }
}

TEST(TokenCodecTest, IdsAreLittleEndianInt32) {
  const std::vector<int32_t> tokens = {0x01020304, -2};
  const std::string sealed = EncodeTokens(tokens);
  absl::StatusOr<std::string_view> payload =
      OpenEnvelope(sealed, BlobKind::kTokens);
  ASSERT_OK(payload);
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
  ASSERT_OK(value);
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

TEST(StateValueTest, EdgesAndCopyingDecoderMatchTheWholeValue) {
  const std::string blob(300000, 'q');
  const std::string whole = EncodeStateValue(blob, 77, 1234);
  const StateValueEdges edges = EncodeStateValueEdges(blob, 77, 1234);
  EXPECT_EQ(edges.head + blob + edges.tail, whole);
  EXPECT_EQ(edges.stored_bytes, static_cast<int64_t>(whole.size()));

  std::string copy;
  absl::StatusOr<StateValue> value = DecodeStateValueCopy(whole, &copy);
  ASSERT_OK(value);
  EXPECT_EQ(copy, blob);
  EXPECT_EQ(value->recompute_tokens, 77);
  EXPECT_EQ(value->written_unix_ms, 1234);

  std::string bad = whole;
  bad[bad.size() / 2] ^= 0x01;
  EXPECT_EQ(DecodeStateValueCopy(bad, &copy).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(copy.empty());
  EXPECT_EQ(DecodeStateValueCopy(whole.substr(0, whole.size() - 1), &copy)
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateIndexTest, FormAndFlopsRoundTripAndOldLayoutDecodes) {
  const StateIndexEntry entry{.stored_bytes = 5,
                              .recompute_tokens = 6,
                              .written_unix_ms = 7,
                              .flops_per_token = 2.5e9,
                              .form = StateForm::kManifest};
  absl::StatusOr<StateIndexEntry> decoded =
      DecodeStateIndex(EncodeStateIndex(entry));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->flops_per_token, 2.5e9);
  EXPECT_EQ(decoded->form, StateForm::kManifest);

  // The first layout: three fields, no FLOPs or form.
  std::string v1;
  for (int64_t field : {int64_t{5}, int64_t{6}, int64_t{7}}) {
    for (int i = 0; i < 8; ++i)
      v1.push_back(static_cast<char>(field >> (8 * i)));
  }
  const std::string_view parts[] = {v1};
  decoded = DecodeStateIndex(SealEnvelope(BlobKind::kStateIndex, parts));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->form, StateForm::kWhole);
  EXPECT_EQ(decoded->flops_per_token, 0);
  EXPECT_EQ(decoded->stored_bytes, 5);
}

// The second layout (33 bytes: no tenant) of `entry`, as stores before
// tenant budgets wrote it.
std::string IndexV2Payload(const StateIndexEntry& entry) {
  std::string payload;
  AppendI64(payload, entry.stored_bytes);
  AppendI64(payload, entry.recompute_tokens);
  AppendI64(payload, entry.written_unix_ms);
  AppendU64(payload, std::bit_cast<uint64_t>(entry.flops_per_token));
  AppendU8(payload, static_cast<uint8_t>(entry.form));
  return payload;
}

TEST(StateIndexTest, TenantRoundTripsAndTheSecondLayoutHasNone) {
  const StateIndexEntry entry{.stored_bytes = 5,
                              .recompute_tokens = 6,
                              .written_unix_ms = 7,
                              .flops_per_token = 1.5,
                              .form = StateForm::kBlock,
                              .tenant = "acme"};
  absl::StatusOr<StateIndexEntry> decoded =
      DecodeStateIndex(EncodeStateIndex(entry));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->tenant, "acme");
  EXPECT_EQ(decoded->form, StateForm::kBlock);
  EXPECT_EQ(decoded->flops_per_token, 1.5);
  EXPECT_EQ(decoded->stored_bytes, 5);

  decoded = DecodeStateIndex(EncodeStateIndex({.stored_bytes = 5}));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->tenant, "");

  const std::string v2 = IndexV2Payload(entry);
  ASSERT_EQ(v2.size(), 33u);
  const std::string_view v2_parts[] = {v2};
  decoded = DecodeStateIndex(SealEnvelope(BlobKind::kStateIndex, v2_parts));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->tenant, "");
  EXPECT_EQ(decoded->form, StateForm::kBlock);
  EXPECT_EQ(decoded->recompute_tokens, 6);

  // The longest tenant a record may hold still decodes.
  const StateIndexEntry longest{.tenant =
                                    std::string(kMaxRecordFieldBytes, 't')};
  decoded = DecodeStateIndex(EncodeStateIndex(longest));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->tenant.size(), kMaxRecordFieldBytes);
}

TEST(StateIndexTest, MalformedTenantLengthIsDataLoss) {
  const StateIndexEntry entry{.stored_bytes = 5, .tenant = "acme"};
  auto decode = [](const std::string& payload) {
    const std::string_view parts[] = {payload};
    return DecodeStateIndex(SealEnvelope(BlobKind::kStateIndex, parts))
        .status()
        .code();
  };
  std::string payload = IndexV2Payload(entry);
  std::string longer = payload;
  AppendU32(longer, 5);  // says 5 bytes, holds 4
  longer += "acme";
  EXPECT_EQ(decode(longer), absl::StatusCode::kDataLoss);
  std::string shorter = payload;
  AppendU32(shorter, 3);  // says 3 bytes, holds 4
  shorter += "acme";
  EXPECT_EQ(decode(shorter), absl::StatusCode::kDataLoss);
  std::string huge = payload;
  AppendU32(huge, 0xffffffffu);
  huge += "acme";
  EXPECT_EQ(decode(huge), absl::StatusCode::kDataLoss);
  std::string cut = payload;  // a length prefix cut short
  cut += std::string("\x04\x00", 2);
  EXPECT_EQ(decode(cut), absl::StatusCode::kDataLoss);
  std::string too_long = payload;
  AppendLengthPrefixed(too_long, std::string(kMaxRecordFieldBytes + 1, 't'));
  EXPECT_EQ(decode(too_long), absl::StatusCode::kDataLoss);
}

TEST(BlockManifestTest, RoundTripAndMalformedCounts) {
  BlockManifest manifest;
  manifest.recompute_tokens = 9;
  manifest.written_unix_ms = 10;
  const StateKey root = RootKey("fp", "chunked", "t");
  manifest.blocks = {{BlockKey(root, 0), 100, BlockChecksum("a")},
                     {BlockKey(root, 1), 0, BlockChecksum("")}};
  absl::StatusOr<BlockManifest> decoded =
      DecodeManifest(EncodeManifest(manifest));
  ASSERT_OK(decoded);
  ASSERT_EQ(decoded->blocks.size(), 2u);
  EXPECT_EQ(decoded->blocks[1].key, BlockKey(root, 1));
  EXPECT_EQ(decoded->blocks[0].checksum, BlockChecksum("a"));
  EXPECT_NE(BlockKey(root, 0), BlockKey(root, 1));

  // A count that disagrees with the bytes is DATA_LOSS, not an allocation.
  std::string payload(20, '\0');
  payload[16] = '\xff';
  payload[17] = '\xff';
  const std::string_view parts[] = {payload};
  EXPECT_EQ(DecodeManifest(SealEnvelope(BlobKind::kBlockManifest, parts))
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateRefTest, KeysAndValuesRoundTrip) {
  const StateKey state = RootKey("fp", "causal", "t");
  const std::string key = RefKey(state, std::string("t\0doc", 5));
  absl::StatusOr<RefKeyParts> parts = ParseRefKey(key);
  ASSERT_OK(parts);
  EXPECT_EQ(parts->state, state);
  EXPECT_EQ(parts->document_key, std::string_view("t\0doc", 5));
  EXPECT_EQ(ParseRefKey("short").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(*DecodeRef(EncodeRef(true)));
  EXPECT_FALSE(*DecodeRef(EncodeRef(false)));
  EXPECT_EQ(DecodeRef(EncodeTokens(std::vector<int32_t>{1})).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateIndexTest, RoundTripAndSizeCheck) {
  const StateIndexEntry entry{.stored_bytes = 20 << 20,
                              .recompute_tokens = 4096,
                              .written_unix_ms = 99};
  absl::StatusOr<StateIndexEntry> decoded =
      DecodeStateIndex(EncodeStateIndex(entry));
  ASSERT_OK(decoded);
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
