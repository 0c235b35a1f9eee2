// State codec: round trips are bit-identical; every single-byte corruption
// and every truncation of a blob is DATA_LOSS; well-formed blobs with a
// valid checksum but wrong structure are DATA_LOSS; another model's state is
// FAILED_PRECONDITION; a failed decode leaves the target untouched. Runs on
// hand-built states of the three Based layer kinds (small, so every byte is
// tried with several flip patterns) and on a real tiny-model state.
#define XXH_INLINE_ALL
#include "engine/state/state_codec.h"

#include <xxhash.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/layers/linear_attention_state.h"
#include "engine/layers/short_conv_state.h"
#include "engine/layers/window_kv_state.h"
#include "engine/models/model.h"
#include "engine/state/sequence_state.h"
#include "engine/state/state_io.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

constexpr char kFingerprint[] =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// A state with one layer of each kind, filled from `seed` (zeros if 0).
std::unique_ptr<SequenceState> SmallState(
    uint64_t seed, std::string fingerprint = kFingerprint) {
  auto conv = std::make_unique<ShortConvState>(3, 4);
  auto la = std::make_unique<LinearAttentionState>(2, 3, 5);
  auto ring = std::make_unique<WindowKvState>(3, 2, 2);
  if (seed != 0) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> dist;
    for (float& x : conv->tail()) x = dist(rng);
    for (float& x : la->kv()) x = dist(rng);
    for (float& x : la->k_sum()) x = dist(rng);
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < 4; ++i) {
        ring->key(s)[i] = dist(rng);
        ring->value(s)[i] = dist(rng);
      }
    }
    ring->set_count(7);
  }
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.push_back(std::move(conv));
  layers.push_back(std::move(la));
  layers.push_back(std::move(ring));
  auto state = std::make_unique<SequenceState>(std::move(fingerprint),
                                               std::move(layers));
  if (seed != 0) state->set_token_count(7);
  return state;
}

// Replaces the trailing checksum so that only the structure is wrong.
std::string ResealCodecBlob(std::string blob) {
  const uint64_t h = XXH3_64bits(blob.data(), blob.size() - 8);
  std::memcpy(blob.data() + blob.size() - 8, &h, 8);
  return blob;
}

TEST(StateCodecTest, RoundTripIsBitIdentical) {
  auto state = SmallState(1);
  const std::string blob = EncodeState(*state);
  auto decoded = SmallState(0);
  ASSERT_OK(DecodeStateInto(blob, *decoded));
  EXPECT_EQ(decoded->token_count(), 7);
  EXPECT_EQ(EncodeState(*decoded), blob);
}

TEST(StateCodecTest, SizesComeFromTheSerializer) {
  auto state = SmallState(2);
  int64_t payload = 0;
  for (int i = 0; i < state->num_layers(); ++i) {
    const LayerState& l = state->layer(i);
    std::string bytes;
    StateWriter w(&bytes);
    l.Serialize(w);
    EXPECT_EQ(l.ByteSize(), static_cast<int64_t>(bytes.size())) << l.kind();
    payload += l.ByteSize();
  }
  EXPECT_EQ(state->ByteSize(), payload);
  // conv tail [2, 4]; kv [2, 3, 5] + k [2, 5]; count + 2 x [3, 2, 2]: each
  // tensor adds rank, dims and a byte count.
  EXPECT_EQ(state->layer(0).ByteSize(), 4 + 2 * 8 + 8 + 8 * 4);
  EXPECT_EQ(state->layer(1).ByteSize(),
            (4 + 3 * 8 + 8 + 30 * 4) + (4 + 2 * 8 + 8 + 10 * 4));
  EXPECT_EQ(state->layer(2).ByteSize(), 8 + 2 * (4 + 3 * 8 + 8 + 12 * 4));
}

TEST(StateCodecTest, CloneIsIndependent) {
  auto state = SmallState(3);
  auto clone = state->Clone();
  EXPECT_EQ(EncodeState(*clone), EncodeState(*state));
  dynamic_cast<ShortConvState&>(clone->layer(0)).tail()[0] += 1.0f;
  clone->set_token_count(99);
  EXPECT_NE(EncodeState(*clone), EncodeState(*state));
  EXPECT_EQ(state->token_count(), 7);
}

void ExpectEveryCorruptionRejected(const std::string& blob,
                                   SequenceState& target,
                                   const std::vector<uint8_t>& patterns) {
  const std::string before = EncodeState(target);
  for (size_t i = 0; i < blob.size(); ++i) {
    for (uint8_t p : patterns) {
      std::string bad = blob;
      bad[i] = static_cast<char>(bad[i] ^ p);
      const absl::Status s = DecodeStateInto(bad, target);
      ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss)
          << "byte " << i << " ^ " << int{p} << ": " << s;
    }
  }
  for (size_t n = 0; n < blob.size(); ++n) {
    const absl::Status s = DecodeStateInto(blob.substr(0, n), target);
    ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << "truncated to " << n;
  }
  ASSERT_EQ(DecodeStateInto(blob + '\0', target).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(EncodeState(target), before);  // never partly overwritten
}

TEST(StateCodecTest, EverySingleByteCorruptionAndTruncationIsDataLoss) {
  const std::string blob = EncodeState(*SmallState(4));
  auto target = SmallState(5);
  ExpectEveryCorruptionRejected(blob, *target, {0x01, 0x80, 0xff});
}

TEST(StateCodecTest, ForeignFingerprintIsFailedPrecondition) {
  const std::string blob = EncodeState(*SmallState(6, std::string(64, 'a')));
  auto target = SmallState(7);
  const std::string before = EncodeState(*target);
  const absl::Status s = DecodeStateInto(blob, *target);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(EncodeState(*target), before);
}

// Builds a blob field by field (format in state_codec.h), sealed with a
// valid checksum, so that structural checks are reached.
struct BlobSpec {
  uint32_t version = 1;
  int header_len_delta = 0;
  std::string fingerprint = kFingerprint;
  std::string dtype = "f32";
  int64_t token_count = 7;
  uint32_t layer_count = 3;
  std::string conv_kind = "short_conv";
  int64_t conv_dim0 = 2;
  int section_delta = 0;
  std::string trailing;
};

std::string BuildBlob(const BlobSpec& spec) {
  auto state = SmallState(8);
  std::string header;
  StateWriter h(&header);
  h.WriteString(spec.fingerprint);
  h.WriteString(spec.dtype);
  h.WriteI64(spec.token_count);
  h.WriteU32(spec.layer_count);
  std::string out = "TWST";
  StateWriter w(&out);
  w.WriteU32(spec.version);
  w.WriteU32(static_cast<uint32_t>(header.size() + spec.header_len_delta));
  out += header;
  for (int i = 0; i < 3; ++i) {
    std::string section;
    StateWriter sw(&section);
    if (i == 0) {
      auto& conv = dynamic_cast<ShortConvState&>(state->layer(0));
      std::vector<float> data(conv.tail().begin(), conv.tail().end());
      sw.WriteTensor({spec.conv_dim0, 4}, data);
      w.WriteString(spec.conv_kind);
    } else {
      state->layer(i).Serialize(sw);
      w.WriteString(state->layer(i).kind());
    }
    w.WriteU64(section.size() + (i == 2 ? spec.section_delta : 0));
    out += section;
  }
  out += spec.trailing;
  out.append(8, '\0');
  return ResealCodecBlob(out);
}

TEST(StateCodecTest, StructurallyWrongBlobsAreRejected) {
  auto target = SmallState(9);
  ASSERT_OK(DecodeStateInto(BuildBlob({}), *target));
  const std::string good = EncodeState(*target);

  auto code = [&](BlobSpec spec) {
    return DecodeStateInto(BuildBlob(spec), *target).code();
  };
  using absl::StatusCode;
  BlobSpec s;
  s.version = 2;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "unknown version";
  s = {};
  s.header_len_delta = 1;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "header length";
  s = {};
  s.header_len_delta = -1;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "header length";
  s = {};
  s.token_count = -1;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "negative token count";
  s = {};
  s.layer_count = 4;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "layer count";
  s = {};
  s.conv_kind = "linear_attention";
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "layer kind";
  s = {};
  s.conv_dim0 = 3;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "tensor shape";
  s = {};
  s.section_delta = 4;
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "section length";
  s = {};
  s.trailing = "xx";
  EXPECT_EQ(code(s), StatusCode::kDataLoss) << "trailing bytes";
  s = {};
  s.fingerprint = std::string(64, 'b');
  EXPECT_EQ(code(s), StatusCode::kFailedPrecondition) << "fingerprint";
  s = {};
  s.dtype = "bf16";
  EXPECT_EQ(code(s), StatusCode::kFailedPrecondition) << "dtype";
  EXPECT_EQ(EncodeState(*target), good);
  std::string not_a_blob(100, 'x');
  EXPECT_EQ(DecodeStateInto(not_a_blob, *target).code(), StatusCode::kDataLoss);
}

TEST(StateCodecTest, RealModelStateRoundTripsAndRejectsCorruption) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteTinyModel(dir.Sub("m"), 3));
  auto model = testing::LoadOrDie(dir.Sub("m"));
  ASSERT_NE(model, nullptr);
  auto state = model->NewState();
  ASSERT_TRUE(model
                  ->Prefill(testing::RandomTokens(45, 300, 1), *state,
                            PrefillMode::kCausal)
                  .ok());
  const std::string blob = EncodeState(*state);
  EXPECT_EQ(static_cast<int64_t>(blob.size()),
            state->ByteSize() + 12 + /*header*/ (4 + 64 + 4 + 3 + 8 + 4) +
                /*kinds*/ (4 + 10) * 2 + (4 + 16) + (4 + 14) + 8 * 4 + 8);
  auto decoded = model->NewState();
  ASSERT_OK(DecodeStateInto(blob, *decoded));
  EXPECT_EQ(EncodeState(*decoded), blob);
  ExpectEveryCorruptionRejected(blob, *decoded, {0xff});
}

}  // namespace
}  // namespace twice::engine
