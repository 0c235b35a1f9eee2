// The fixture of the resident executor's CPU-device tests
// (resident_executor_test.cc: results against the host models;
// resident_executor_checks_test.cc: states, checks and pools): a tiny
// model of every architecture the executor runs, written once per suite.
#ifndef TWICE_TESTS_ENGINE_RESIDENT_EXECUTOR_FIXTURE_H_
#define TWICE_TESTS_ENGINE_RESIDENT_EXECUTOR_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/executor/resident_executor.h"
#include "engine/executor/resident_layers.h"
#include "engine/layers/feed_forward.h"
#include "engine/layers/full_kv_state.h"
#include "engine/layers/linear_attention_state.h"
#include "engine/layers/mamba2_state.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "engine/layers/short_conv_state.h"
#include "engine/layers/stateless_state.h"
#include "engine/layers/top_k_moe_mlp.h"
#include "engine/layers/window_kv_state.h"
#include "engine/models/init_model.h"
#include "engine/models/stacked_model.h"
#include "gtest/gtest.h"
#include "kernels/sampling.h"
#include "kernels/status_macros.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine::resident_test {

using ::twice::engine::testing::RandomTokens;
using ::twice::engine::testing::TempDir;

inline constexpr int kExecutorVocab = 300;

inline kernels::SamplingRule ExecutorGreedy() { return {}; }
inline kernels::SamplingRule ExecutorSampled(uint64_t seed) {
  kernels::SamplingRule r;
  r.temperature = 0.9f;
  r.top_k = 40;
  r.top_p = 0.95f;
  r.seed = seed;
  return r;
}

// A layer state's numbers, whatever its kind (the window's count last).
inline std::vector<float> LayerFloats(const LayerState& layer) {
  std::vector<float> out;
  auto add = [&out](absl::Span<const float> v) {
    out.insert(out.end(), v.begin(), v.end());
  };
  if (const auto* s = dynamic_cast<const Mamba2State*>(&layer)) {
    add(s->conv_tail());
    add(s->ssm());
  } else if (const auto* s = dynamic_cast<const ShortConvState*>(&layer)) {
    add(s->tail());
  } else if (const auto* s =
                 dynamic_cast<const LinearAttentionState*>(&layer)) {
    add(s->kv());
    add(s->k_sum());
  } else if (const auto* s = dynamic_cast<const WindowKvState*>(&layer)) {
    add(s->keys());
    add(s->values());
    out.push_back(static_cast<float>(s->count()));
  } else if (const auto* s = dynamic_cast<const RatChunkKvState*>(&layer)) {
    add(s->closed());
    add(s->open());
    out.push_back(static_cast<float>(s->count()));
  } else if (dynamic_cast<const StatelessState*>(&layer) != nullptr) {
    // An MLP layer: nothing to compare.
  } else if (const auto* s = dynamic_cast<const FullKvState*>(&layer)) {
    add(s->keys());
    add(s->values());
    out.push_back(static_cast<float>(s->count()));
  } else {
    ADD_FAILURE() << "unexpected layer state " << layer.kind();
  }
  return out;
}

// Parameter: the architecture of the tiny model (every layer kind the
// executor has: Mamba-2's mixer; Based's BaseConv, linear attention,
// sliding window and SwiGLU; JRT-RNN's prefix linear attention; Llama's
// attention over the paged KV cache and its MLP; Nemotron-H's Mamba-2,
// attention without rotary and squared-ReLU MLP layers; RAT's chunk
// attention over paged closed chunks, its window layers and GELU MLP;
// Granite-4.0-H dense and with experts: NoPE attention with its own
// softmax scale, the fused SwiGLU, the top-k mixture and the embedding,
// residual and logit multipliers).
class ResidentExecutorTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const char* arch :
         {"mamba2", "based", "jrt", "llama", "nemotron_h", "rat"}) {
      const std::string out = dir_->Sub(arch);
      ASSERT_OK(testing::WriteTinyModelOf(arch, out, 23, kExecutorVocab));
      // Sharper weights make a row reading another row's state show.
      ASSERT_OK(testing::SharpenWeights(out, 4.0f));
    }
    ASSERT_OK(testing::WriteTinyModelOf("rat", dir_->Sub("ratswa"), 23,
                                        kExecutorVocab, "tiny-swa"));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("ratswa"), 4.0f));
    ASSERT_OK(testing::WriteTinyModelOf(
        "granitemoehybrid", dir_->Sub("granite"), 23, kExecutorVocab));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("granite"), 4.0f));
    ASSERT_OK(testing::WriteTinyModelOf("granitemoehybrid",
                                        dir_->Sub("granitemoe"), 23,
                                        kExecutorVocab, "tiny-moe"));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("granitemoe"), 4.0f));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    model_ = testing::LoadOrDie(dir_->Sub(GetParam()));
    ASSERT_NE(model_, nullptr);
    stacked_ = dynamic_cast<const StackedModel*>(model_.get());
    ASSERT_NE(stacked_, nullptr);
  }

  std::unique_ptr<ResidentExecutor> NewExecutor(int32_t slots = 8,
                                                int64_t prefill_chunk = 64,
                                                int64_t kv_cache_tokens = 4096,
                                                int64_t kv_block_size = 16) {
    ResidentExecutorOptions o;
    o.slots = slots;
    o.prefill_chunk = prefill_chunk;
    o.kv_cache_tokens = kv_cache_tokens;
    o.kv_block_size = kv_block_size;
    absl::StatusOr<std::unique_ptr<ResidentExecutor>> e =
        ResidentExecutor::Create(*stacked_, NewCpuExecutorDevice(), o);
    EXPECT_OK(e);
    return e.ok() ? *std::move(e) : nullptr;
  }

  // The id `rule` draws from one row of logits.
  static absl::StatusOr<int32_t> SampleOne(const std::vector<float>& logits,
                                           const kernels::SamplingRule& rule) {
    int32_t id = -1;
    TWICE_RETURN_IF_ERROR(kernels::SampleRows(
        logits, 1, static_cast<int64_t>(logits.size()), kExecutorVocab,
        absl::MakeConstSpan(&rule, 1), absl::MakeSpan(&id, 1)));
    return id;
  }

  // Sequence i of a batch: a prompt of 2 + i % 9 random tokens, a greedy
  // rule for even i and a sampled one for odd.
  static std::vector<int32_t> BatchPrompt(int i) {
    return RandomTokens(2 + i % 9, kExecutorVocab, 500 + i);
  }
  static kernels::SamplingRule BatchRule(int i) {
    return i % 2 == 0 ? ExecutorGreedy() : ExecutorSampled(1000 + i);
  }
  // `n` sequences of BatchPrompt / BatchRule prefilled in `e`, then
  // `steps` - 1 steps of all of them together: each sequence's ids, the
  // prefill's sampled id first (empty on a failure, which is reported).
  static std::vector<std::vector<int32_t>> StepTogether(ResidentExecutor& e,
                                                        int n, int steps) {
    std::vector<kernels::SamplingRule> rules;
    std::vector<SlotId> slots;
    std::vector<int32_t> next;
    for (int i = 0; i < n; ++i) {
      rules.push_back(BatchRule(i));
      absl::StatusOr<SlotId> slot = e.NewSequence();
      EXPECT_OK(slot);
      if (!slot.ok()) return {};
      absl::StatusOr<std::vector<float>> logits =
          e.Prefill(*slot, BatchPrompt(i));
      EXPECT_OK(logits);
      if (!logits.ok()) return {};
      absl::StatusOr<int32_t> first = SampleOne(*logits, rules[i]);
      EXPECT_OK(first);
      if (!first.ok()) return {};
      slots.push_back(*slot);
      next.push_back(*first);
    }
    std::vector<std::vector<int32_t>> got(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) got[i].push_back(next[i]);
    for (int step = 1; step < steps; ++step) {
      for (auto& r : rules) r.draw = static_cast<uint64_t>(step);
      absl::StatusOr<std::vector<int32_t>> ids = e.Step(next, slots, rules);
      EXPECT_OK(ids);
      if (!ids.ok()) return {};
      next = *ids;
      for (int i = 0; i < n; ++i) got[i].push_back(next[i]);
    }
    return got;
  }

  // `steps` tokens the model generates after `prompt` by `rule`.
  std::vector<int32_t> ModelTokens(const std::vector<int32_t>& prompt,
                                   kernels::SamplingRule rule, int steps) {
    std::unique_ptr<SequenceState> state = model_->NewState();
    absl::StatusOr<std::vector<float>> logits =
        model_->Prefill(prompt, *state, PrefillMode::kCausal);
    EXPECT_OK(logits);
    std::vector<int32_t> out;
    for (int i = 0; i < steps && logits.ok(); ++i) {
      int32_t id = -1;
      rule.draw = static_cast<uint64_t>(i);
      EXPECT_OK(kernels::SampleRows(
          *logits, 1, logits->size(), model_->description().vocab_size,
          absl::MakeConstSpan(&rule, 1), absl::MakeSpan(&id, 1)));
      out.push_back(id);
      logits = model_->Step(id, *state);
      EXPECT_OK(logits);
    }
    return out;
  }

  inline static TempDir* dir_ = nullptr;
  std::unique_ptr<Model> model_;
  const StackedModel* stacked_ = nullptr;
};

}  // namespace twice::engine::resident_test

#endif  // TWICE_TESTS_ENGINE_RESIDENT_EXECUTOR_FIXTURE_H_
