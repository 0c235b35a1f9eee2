#include "storage/blob_envelope.h"

#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "storage/byte_io.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

std::string Seal(BlobKind kind, std::string_view payload) {
  const std::string_view parts[] = {payload};
  return SealEnvelope(kind, parts);
}

// Rewrites the checksum so a test can show a check other than the checksum
// rejects the bytes.
std::string WithFreshChecksum(std::string envelope) {
  const size_t checked = envelope.size() - 8;
  std::string checksum;
  AppendU64(checksum, XXH3_64bits(envelope.data(), checked));
  envelope.replace(checked, 8, checksum);
  return envelope;
}

TEST(BlobEnvelopeTest, RoundTripsEveryKind) {
  for (BlobKind kind : {BlobKind::kState, BlobKind::kRecord, BlobKind::kTokens,
                        BlobKind::kStateIndex}) {
    const std::string sealed = Seal(kind, "payload bytes");
    absl::StatusOr<std::string_view> payload = OpenEnvelope(sealed, kind);
    ASSERT_OK(payload);
    EXPECT_EQ(*payload, "payload bytes");
  }
}

TEST(BlobEnvelopeTest, LayoutIsAsDocumented) {
  const std::string sealed = Seal(BlobKind::kTokens, "abc");
  ASSERT_EQ(sealed.size(), kEnvelopeOverheadBytes + 3);
  EXPECT_EQ(sealed.substr(0, 4), "TWBE");
  EXPECT_EQ(sealed[4], 1);
  EXPECT_EQ(sealed[5], static_cast<char>(BlobKind::kTokens));
  EXPECT_EQ(LoadU64(sealed.data() + 8), 3u);
  EXPECT_EQ(sealed.substr(16, 3), "abc");
  EXPECT_EQ(LoadU64(sealed.data() + 19), XXH3_64bits(sealed.data(), 19));
}

TEST(BlobEnvelopeTest, EmptyPayloadAndPartsConcatenate) {
  const std::string_view none[] = {""};
  const std::string sealed_empty = SealEnvelope(BlobKind::kState, none);
  absl::StatusOr<std::string_view> empty =
      OpenEnvelope(sealed_empty, BlobKind::kState);
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());

  const std::string_view parts[] = {"ab", "", "cd"};
  const std::string sealed = SealEnvelope(BlobKind::kState, parts);
  absl::StatusOr<std::string_view> joined =
      OpenEnvelope(sealed, BlobKind::kState);
  ASSERT_OK(joined);
  EXPECT_EQ(*joined, "abcd");
}

TEST(BlobEnvelopeTest, EverySingleByteCorruptionIsRejected) {
  const std::string sealed =
      Seal(BlobKind::kRecord, "a payload of some forty-odd bytes......");
  int checked = 0;
  for (size_t i = 0; i < sealed.size(); ++i) {
    for (int v = 0; v < 256; ++v) {
      if (static_cast<char>(v) == sealed[i]) continue;
      std::string bad = sealed;
      bad[i] = static_cast<char>(v);
      absl::StatusOr<std::string_view> opened =
          OpenEnvelope(bad, BlobKind::kRecord);
      ASSERT_EQ(opened.status().code(), absl::StatusCode::kDataLoss)
          << "byte " << i << " set to " << v;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(sealed.size()) * 255);
}

TEST(BlobEnvelopeTest, EveryTruncationAndExtensionIsRejected) {
  const std::string sealed = Seal(BlobKind::kTokens, "0123456789abcdef");
  for (size_t n = 0; n < sealed.size(); ++n) {
    EXPECT_EQ(
        OpenEnvelope(std::string_view(sealed).substr(0, n), BlobKind::kTokens)
            .status()
            .code(),
        absl::StatusCode::kDataLoss)
        << "truncated to " << n;
  }
  EXPECT_EQ(OpenEnvelope(sealed + "x", BlobKind::kTokens).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(BlobEnvelopeTest, WrongKindIsRejected) {
  const std::string sealed = Seal(BlobKind::kState, "x");
  EXPECT_EQ(OpenEnvelope(sealed, BlobKind::kRecord).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(BlobEnvelopeTest, UnknownVersionIsRejectedEvenWithValidChecksum) {
  std::string sealed = Seal(BlobKind::kState, "x");
  sealed[4] = 2;
  absl::StatusOr<std::string_view> opened =
      OpenEnvelope(WithFreshChecksum(sealed), BlobKind::kState);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(opened.status().message().find("version"), std::string::npos)
      << opened.status();
}

TEST(BlobEnvelopeTest, NonZeroReservedBytesAreRejectedEvenWithValidChecksum) {
  std::string sealed = Seal(BlobKind::kState, "x");
  sealed[7] = 1;
  EXPECT_EQ(
      OpenEnvelope(WithFreshChecksum(sealed), BlobKind::kState).status().code(),
      absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace twice::storage
