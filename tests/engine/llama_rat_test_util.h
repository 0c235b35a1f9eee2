// Checks shared by the Llama, RAT and Nemotron-H golden tests: golden
// comparisons for the full_kv, rat_chunk_kv and mamba2 states, and the
// invariants of
// design §3 on a model (1: prefill(a) + step(b) == prefill(a+b); 2:
// prefill(a) + prefill(b) == prefill(a+b); 3: encode -> decode -> encode is
// bit-identical and continues identically; 4: the chunked prefill equals
// token-by-token steps).
#ifndef TWICE_TESTS_ENGINE_LLAMA_RAT_TEST_UTIL_H_
#define TWICE_TESTS_ENGINE_LLAMA_RAT_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/layers/full_kv_state.h"
#include "engine/layers/mamba2_state.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "engine/models/model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine::testing {

// Largest RelativeError of the full_kv / rat_chunk_kv / mamba2 layers a case
// lists (the sliding_window ones go through GoldenData::StateError, which
// also checks every layer's kind, "stateless" included).
inline double KvStateError(const GoldenData& golden, SequenceState& state,
                           const nlohmann::json& entries) {
  double worst = 0.0;
  for (const nlohmann::json& e : entries) {
    const int layer = e.at("layer").get<int>();
    const std::string kind = e.at("kind").get<std::string>();
    SCOPED_TRACE(absl::StrCat("layer ", layer, " (", kind, ")"));
    LayerState& s = state.layer(layer);
    if (kind == "full_kv") {
      auto* kv = dynamic_cast<FullKvState*>(&s);
      if (kv == nullptr) {
        ADD_FAILURE() << "not a full_kv state";
        return INFINITY;
      }
      EXPECT_EQ(kv->count(), e.at("count").get<int64_t>());
      worst =
          std::max(worst, RelativeError(kv->keys(), golden.Values(e, "keys")));
      worst = std::max(worst,
                       RelativeError(kv->values(), golden.Values(e, "values")));
    } else if (kind == "mamba2") {
      auto* m = dynamic_cast<Mamba2State*>(&s);
      if (m == nullptr) {
        ADD_FAILURE() << "not a mamba2 state";
        return INFINITY;
      }
      worst = std::max(
          worst, RelativeError(m->conv_tail(), golden.Values(e, "conv_tail")));
      worst = std::max(worst, RelativeError(m->ssm(), golden.Values(e, "ssm")));
    } else if (kind == "rat_chunk_kv") {
      auto* rat = dynamic_cast<RatChunkKvState*>(&s);
      if (rat == nullptr) {
        ADD_FAILURE() << "not a rat_chunk_kv state";
        return INFINITY;
      }
      EXPECT_EQ(rat->count(), e.at("count").get<int64_t>());
      const std::vector<float> closed = golden.Values(e, "closed");
      if (closed.empty()) {
        EXPECT_EQ(rat->closed_chunks(), 0);
      } else {
        worst = std::max(worst, RelativeError(rat->closed(), closed));
      }
      const int64_t d = rat->dim();
      std::vector<float> open(rat->open_key(), rat->open_key() + d);
      open.insert(open.end(), rat->open_value(), rat->open_value() + d);
      worst = std::max(worst, RelativeError(open, golden.Values(e, "open")));
    }
  }
  return worst;
}

inline std::vector<float> PrefillOrDie(const Model& m,
                                       absl::Span<const int32_t> tokens,
                                       SequenceState& s) {
  auto logits = m.Prefill(tokens, s, PrefillMode::kCausal);
  EXPECT_OK(logits);
  return logits.ok() ? *logits : std::vector<float>();
}

// Invariants 1, 2 and 4 over `tokens`, split at every point in `splits`.
inline void ExpectStatePassingExact(const Model& m,
                                    const std::vector<int32_t>& tokens,
                                    const std::vector<size_t>& splits,
                                    double tolerance) {
  auto whole = m.NewState();
  const std::vector<float> want = PrefillOrDie(m, tokens, *whole);
  for (size_t a : splits) {
    SCOPED_TRACE(absl::StrCat("split at ", a));
    const auto span = absl::MakeConstSpan(tokens);
    // 2: prefill(a) + prefill(b).
    auto s = m.NewState();
    PrefillOrDie(m, span.first(a), *s);
    EXPECT_LE(RelativeError(PrefillOrDie(m, span.subspan(a), *s), want),
              tolerance);
    EXPECT_EQ(EncodeState(*s).size(), EncodeState(*whole).size());
    // 1: prefill(a) + steps(b).
    auto t = m.NewState();
    PrefillOrDie(m, span.first(a), *t);
    std::vector<float> got;
    for (size_t i = a; i < tokens.size(); ++i) {
      auto l = m.Step(tokens[i], *t);
      ASSERT_OK(l);
      got = *l;
    }
    EXPECT_LE(RelativeError(got, want), tolerance);
  }
  // 4: the chunked prefill (one call) vs the recurrence (one step per token).
  auto r = m.NewState();
  std::vector<float> got;
  for (int32_t tok : tokens) {
    auto l = m.Step(tok, *r);
    ASSERT_OK(l);
    got = *l;
  }
  EXPECT_LE(RelativeError(got, want), tolerance);
}

// StepBatch over states at different positions equals one Step per state,
// and a batch with an invalid token changes no state.
inline void ExpectStepBatchMatchesSteps(const Model& m, double tolerance) {
  std::vector<std::unique_ptr<SequenceState>> batch, single;
  for (int n : {1, 6, 17}) {
    batch.push_back(m.NewState());
    PrefillOrDie(m, RandomTokens(n, 249, n), *batch.back());
    single.push_back(batch.back()->Clone());
  }
  const std::vector<int32_t> next = {3, 5, 7};
  std::vector<SequenceState*> ptrs;
  for (auto& s : batch) ptrs.push_back(s.get());
  const std::string before = EncodeState(*batch[1]);
  EXPECT_FALSE(m.StepBatch(std::vector<int32_t>{3, -1, 7}, ptrs).ok());
  EXPECT_EQ(EncodeState(*batch[1]), before);
  auto got = m.StepBatch(next, ptrs);
  ASSERT_OK(got);
  const int64_t v = m.description().padded_vocab_size;
  for (size_t b = 0; b < next.size(); ++b) {
    auto want = m.Step(next[b], *single[b]);
    ASSERT_OK(want);
    EXPECT_LE(RelativeError(absl::MakeConstSpan(*got).subspan(b * v, v), *want),
              tolerance);
    EXPECT_EQ(batch[b]->token_count(), single[b]->token_count());
  }
}

// Invariant 3, plus the codec's refusal of truncated or corrupted blobs.
inline void ExpectCodecRoundTrip(const Model& m,
                                 const std::vector<int32_t>& tokens) {
  auto s = m.NewState();
  PrefillOrDie(m, tokens, *s);
  const std::string blob = EncodeState(*s);
  auto back = m.NewState();
  ASSERT_OK(DecodeStateInto(blob, *back));
  EXPECT_EQ(back->token_count(), s->token_count());
  EXPECT_EQ(EncodeState(*back), blob);  // bit-identical
  auto a = m.Step(tokens[0], *s);
  auto b = m.Step(tokens[0], *back);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(*a, *b);
  // Every truncation and a flipped byte are errors, never crashes.
  for (size_t n : {size_t{0}, size_t{7}, blob.size() / 2, blob.size() - 1}) {
    auto e = m.NewState();
    EXPECT_FALSE(DecodeStateInto(blob.substr(0, n), *e).ok()) << n;
  }
  std::string bad = blob;
  bad[bad.size() / 2] ^= 0x40;
  auto e = m.NewState();
  EXPECT_FALSE(DecodeStateInto(bad, *e).ok());
}

}  // namespace twice::engine::testing

#endif  // TWICE_TESTS_ENGINE_LLAMA_RAT_TEST_UTIL_H_
