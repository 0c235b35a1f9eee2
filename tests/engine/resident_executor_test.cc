// ResidentExecutor on the CPU device: the resident executor's logic (slots,
// batching, checks, save/resume) and its layers against the host models
// (Mamba2Model, BasedModel), which compute the same equations without it
// (their own goldens hold them to the float64 references).
#include "engine/executor/resident_executor.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

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
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::RandomTokens;
using testing::TempDir;

constexpr int kExecutorVocab = 300;

kernels::SamplingRule ExecutorGreedy() { return {}; }
kernels::SamplingRule ExecutorSampled(uint64_t seed) {
  kernels::SamplingRule r;
  r.temperature = 0.9f;
  r.top_k = 40;
  r.top_p = 0.95f;
  r.seed = seed;
  return r;
}

// A layer state's numbers, whatever its kind (the window's count last).
std::vector<float> LayerFloats(const LayerState& layer) {
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

  static TempDir* dir_;
  std::unique_ptr<Model> model_;
  const StackedModel* stacked_ = nullptr;
};

TempDir* ResidentExecutorTest::dir_ = nullptr;

TEST_P(ResidentExecutorTest, PrefillInPassesMatchesTheModel) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/4,
                                                    /*prefill_chunk=*/64);
  ASSERT_NE(e, nullptr);
  for (int n : {1, 63, 64, 150}) {
    SCOPED_TRACE(n);
    const std::vector<int32_t> tokens = RandomTokens(n, kExecutorVocab, n);
    std::unique_ptr<SequenceState> state = model_->NewState();
    ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                         model_->Prefill(tokens, *state, PrefillMode::kCausal));
    ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
    ASSERT_OK_AND_ASSIGN(std::vector<float> got, e->Prefill(slot, tokens));
    EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
    ASSERT_OK_AND_ASSIGN(int64_t count, e->TokenCount(slot));
    EXPECT_EQ(count, n);
    // The state the slot holds is the model's, layer by layer.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> saved, e->Save(slot));
    EXPECT_EQ(saved->token_count(), n);
    for (int l = 0; l < saved->num_layers(); ++l) {
      EXPECT_LE(testing::ExcessOverSummationOrder(LayerFloats(saved->layer(l)),
                                                  LayerFloats(state->layer(l))),
                0.0)
          << l;
    }
    ASSERT_OK(e->Release(slot));
  }
}

TEST_P(ResidentExecutorTest, BatchedStepsMatchTheModelsStepBatch) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/6);
  ASSERT_NE(e, nullptr);
  constexpr int kRows = 5;
  std::vector<SlotId> slots;
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<int32_t> tokens;
  for (int b = 0; b < kRows; ++b) {
    const std::vector<int32_t> prompt =
        RandomTokens(3 + 7 * b, kExecutorVocab, 100 + b);
    states.push_back(model_->NewState());
    ASSERT_OK(model_->Prefill(prompt, *states.back(), PrefillMode::kCausal));
    ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
    ASSERT_OK(e->Prefill(slot, prompt));
    slots.push_back(slot);
    tokens.push_back(static_cast<int32_t>(b * 37 % kExecutorVocab));
  }
  std::vector<SequenceState*> raw;
  for (auto& s : states) raw.push_back(s.get());
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE(step);
    ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                         model_->StepBatch(tokens, raw));
    ASSERT_OK_AND_ASSIGN(std::vector<float> got, e->StepLogits(tokens, slots));
    EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
    for (int b = 0; b < kRows; ++b) {
      tokens[b] =
          static_cast<int32_t>((tokens[b] * 31 + step + b) % kExecutorVocab);
    }
  }
}

TEST_P(ResidentExecutorTest, SixtyFourSequencesGetTheTokensEachGetsAlone) {
  constexpr int kSequences = 64;
  constexpr int kSteps = 6;
  std::unique_ptr<ResidentExecutor> batched = NewExecutor(kSequences);
  std::unique_ptr<ResidentExecutor> alone = NewExecutor(1);
  ASSERT_NE(batched, nullptr);
  ASSERT_NE(alone, nullptr);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<kernels::SamplingRule> rules;
  std::vector<SlotId> slots;
  std::vector<int32_t> next;
  for (int i = 0; i < kSequences; ++i) {
    prompts.push_back(RandomTokens(2 + i % 9, kExecutorVocab, 500 + i));
    rules.push_back(i % 2 == 0 ? ExecutorGreedy() : ExecutorSampled(1000 + i));
    ASSERT_OK_AND_ASSIGN(SlotId slot, batched->NewSequence());
    ASSERT_OK_AND_ASSIGN(std::vector<float> logits,
                         batched->Prefill(slot, prompts[i]));
    int32_t first = -1;
    ASSERT_OK(kernels::SampleRows(logits, 1, logits.size(), kExecutorVocab,
                                  absl::MakeConstSpan(&rules[i], 1),
                                  absl::MakeSpan(&first, 1)));
    slots.push_back(slot);
    next.push_back(first);
  }
  std::vector<std::vector<int32_t>> got(kSequences);
  for (int i = 0; i < kSequences; ++i) got[i].push_back(next[i]);
  for (int step = 1; step < kSteps; ++step) {
    for (auto& r : rules) r.draw = static_cast<uint64_t>(step);
    ASSERT_OK_AND_ASSIGN(next, batched->Step(next, slots, rules));
    for (int i = 0; i < kSequences; ++i) got[i].push_back(next[i]);
  }
  for (int i = 0; i < kSequences; ++i) {
    SCOPED_TRACE(i);
    // Alone: the same executor code with one slot, and the model itself.
    kernels::SamplingRule rule =
        i % 2 == 0 ? ExecutorGreedy() : ExecutorSampled(1000 + i);
    EXPECT_EQ(got[i], ModelTokens(prompts[i], rule, kSteps));
    ASSERT_OK_AND_ASSIGN(SlotId slot, alone->NewSequence());
    ASSERT_OK_AND_ASSIGN(std::vector<float> logits,
                         alone->Prefill(slot, prompts[i]));
    int32_t id = -1;
    ASSERT_OK(kernels::SampleRows(logits, 1, logits.size(), kExecutorVocab,
                                  absl::MakeConstSpan(&rule, 1),
                                  absl::MakeSpan(&id, 1)));
    std::vector<int32_t> mine = {id};
    for (int step = 1; step < kSteps; ++step) {
      rule.draw = static_cast<uint64_t>(step);
      const SlotId one[] = {slot};
      ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids,
                           alone->Step(std::vector<int32_t>{mine.back()}, one,
                                       absl::MakeConstSpan(&rule, 1)));
      mine.push_back(ids[0]);
    }
    EXPECT_EQ(mine, got[i]);
    ASSERT_OK(alone->Release(slot));
  }
}

TEST_P(ResidentExecutorTest, AStepBringsBackOnlyTheIds) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/16);
  ASSERT_NE(e, nullptr);
  std::vector<SlotId> slots;
  for (int b = 0; b < 16; ++b) {
    ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
    ASSERT_OK(e->Prefill(slot, RandomTokens(5, kExecutorVocab, b)));
    slots.push_back(slot);
  }
  const std::vector<int32_t> tokens(16, 7);
  const std::vector<kernels::SamplingRule> rules(16, ExecutorGreedy());
  const DeviceTraffic before = e->device().traffic();
  ASSERT_OK(e->Step(tokens, slots, rules));
  const DeviceTraffic after = e->device().traffic();
  // A mixture of experts routes on the host: each such layer brings back
  // its router logits [rows, E] too.
  int64_t router_bytes = 0;
  for (const StackedModel::Block& b : stacked_->blocks()) {
    if (const auto* moe = dynamic_cast<const TopKMoeMlp*>(b.ffn.get())) {
      router_bytes +=
          16 * moe->shape().experts * static_cast<int64_t>(sizeof(float));
    }
  }
  EXPECT_EQ(GetParam() == "granitemoe", router_bytes > 0);
  EXPECT_EQ(after.bytes_to_host - before.bytes_to_host,
            16 * static_cast<int64_t>(sizeof(int32_t)) + router_bytes);
  EXPECT_EQ(after.bytes_to_device - before.bytes_to_device, 0);
}

TEST_P(ResidentExecutorTest, StatesMoveBetweenTheExecutorAndTheModel) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor();
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> prompt = RandomTokens(40, kExecutorVocab, 9);
  const std::vector<int32_t> want = ModelTokens(prompt, ExecutorGreedy(), 8);
  const kernels::SamplingRule greedy[] = {ExecutorGreedy()};

  // Read on the executor, saved, continued by the model.
  ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(std::vector<float> logits, e->Prefill(slot, prompt));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> saved, e->Save(slot));
  EXPECT_EQ(saved->fingerprint(), model_->description().fingerprint);
  std::vector<int32_t> continued;
  int32_t id = -1;
  ASSERT_OK(kernels::SampleRows(logits, 1, logits.size(), kExecutorVocab,
                                greedy, absl::MakeSpan(&id, 1)));
  for (int i = 0; i < 8; ++i) {
    continued.push_back(id);
    ASSERT_OK_AND_ASSIGN(logits, model_->Step(id, *saved));
    ASSERT_OK(kernels::SampleRows(logits, 1, logits.size(), kExecutorVocab,
                                  greedy, absl::MakeSpan(&id, 1)));
  }
  EXPECT_EQ(continued, want);

  // Read by the model, resumed on the executor, continued there.
  std::unique_ptr<SequenceState> state = model_->NewState();
  ASSERT_OK_AND_ASSIGN(logits,
                       model_->Prefill(prompt, *state, PrefillMode::kCausal));
  ASSERT_OK_AND_ASSIGN(SlotId resumed, e->Resume(*state));
  ASSERT_OK_AND_ASSIGN(int64_t count, e->TokenCount(resumed));
  EXPECT_EQ(count, 40);
  ASSERT_OK(kernels::SampleRows(logits, 1, logits.size(), kExecutorVocab,
                                greedy, absl::MakeSpan(&id, 1)));
  std::vector<int32_t> on_executor;
  const SlotId one[] = {resumed};
  for (int i = 0; i < 8; ++i) {
    on_executor.push_back(id);
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids,
                         e->Step(std::vector<int32_t>{id}, one, greedy));
    id = ids[0];
  }
  EXPECT_EQ(on_executor, want);
}

TEST_P(ResidentExecutorTest, BadCallsAreRefusedWithTheSlotsUnchanged) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/2);
  ASSERT_NE(e, nullptr);
  ASSERT_OK_AND_ASSIGN(SlotId a, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId b, e->NewSequence());
  ASSERT_OK(e->Prefill(a, RandomTokens(12, kExecutorVocab, 3)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> before, e->Save(a));

  EXPECT_EQ(e->NewSequence().status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(
      e->Prefill(a, std::vector<int32_t>{1, kExecutorVocab}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Prefill(a, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<SlotId> twice = {a, a};
  EXPECT_EQ(e->StepLogits(std::vector<int32_t>{1, 2}, twice).status().code(),
            absl::StatusCode::kInvalidArgument);
  kernels::SamplingRule bad = ExecutorGreedy();
  bad.top_p = 0.0f;
  const SlotId only_a[] = {a};
  EXPECT_EQ(
      e->Step(std::vector<int32_t>{1}, only_a, absl::MakeConstSpan(&bad, 1))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Step(std::vector<int32_t>{1, 2}, only_a,
                    std::vector<kernels::SamplingRule>(2))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A bad id in row 1 leaves row 0's slot unread too.
  const std::vector<SlotId> ab = {a, b};
  EXPECT_EQ(e->StepLogits(std::vector<int32_t>{1, -4}, ab).status().code(),
            absl::StatusCode::kInvalidArgument);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> after, e->Save(a));
  EXPECT_EQ(after->token_count(), 12);
  for (int l = 0; l < after->num_layers(); ++l) {
    EXPECT_EQ(LayerFloats(after->layer(l)), LayerFloats(before->layer(l))) << l;
  }

  // A released slot's id is refused, also once the slot is reused.
  ASSERT_OK(e->Release(b));
  EXPECT_EQ(e->Prefill(b, std::vector<int32_t>{1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->Release(b).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(SlotId reused, e->NewSequence());
  EXPECT_EQ(reused.index, b.index);
  EXPECT_EQ(e->Save(b).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->Save(SlotId{7, 1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->sequences(), 2);
}

TEST_P(ResidentExecutorTest, ResumeRefusesStatesOfOtherModels) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor();
  ASSERT_NE(e, nullptr);
  std::unique_ptr<SequenceState> state = model_->NewState();
  ASSERT_OK(model_->Prefill(RandomTokens(4, kExecutorVocab, 1), *state,
                            PrefillMode::kCausal));
  std::vector<std::unique_ptr<LayerState>> layers;
  for (int l = 0; l < state->num_layers(); ++l) {
    layers.push_back(state->layer(l).Clone());
  }
  SequenceState foreign("another-model", std::move(layers));
  EXPECT_EQ(e->Resume(foreign).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<std::unique_ptr<LayerState>> fewer;
  fewer.push_back(state->layer(0).Clone());
  SequenceState short_state(model_->description().fingerprint,
                            std::move(fewer));
  EXPECT_EQ(e->Resume(short_state).status().code(),
            absl::StatusCode::kFailedPrecondition);
  state->MarkDamaged();
  EXPECT_EQ(e->Resume(*state).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->sequences(), 0);
}

TEST_P(ResidentExecutorTest, Bf16WeightsStayBf16AndMatchTheModel) {
  std::unique_ptr<Model> bf16 =
      testing::LoadOrDie(dir_->Sub(GetParam()), DType::kBF16);
  ASSERT_NE(bf16, nullptr);
  const auto& m = dynamic_cast<const StackedModel&>(*bf16);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ResidentExecutor> e,
                       ResidentExecutor::Create(m, NewCpuExecutorDevice()));
  const std::vector<int32_t> tokens = RandomTokens(30, kExecutorVocab, 77);
  std::unique_ptr<SequenceState> state = bf16->NewState();
  ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                       bf16->Prefill(tokens, *state, PrefillMode::kCausal));
  ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, e->Prefill(slot, tokens));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  // The matrices are the loaded bf16 ones, not widened copies: the
  // executor's weights take little more than half the f32 model's.
  std::unique_ptr<ResidentExecutor> f32 = NewExecutor();
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(m.embedding().dtype(), DType::kBF16);
  EXPECT_LT(e->weight_bytes(), f32->weight_bytes() * 6 / 10);
}

TEST_P(ResidentExecutorTest, ResumeRefusesAStateWhoseLayersDisagree) {
  if (GetParam() == "mamba2" || GetParam() == "llama" || GetParam() == "rat") {
    GTEST_SKIP() << "every layer has the same state shape";
  }
  std::unique_ptr<ResidentExecutor> e = NewExecutor();
  ASSERT_NE(e, nullptr);
  std::unique_ptr<SequenceState> state = model_->NewState();
  ASSERT_OK(model_->Prefill(RandomTokens(9, kExecutorVocab, 4), *state,
                            PrefillMode::kCausal));
  // The layers in another order: each is some other layer's kind or shape.
  std::vector<std::unique_ptr<LayerState>> rotated;
  for (int l = 0; l < state->num_layers(); ++l) {
    rotated.push_back(state->layer((l + 1) % state->num_layers()).Clone());
  }
  SequenceState mixed(model_->description().fingerprint, std::move(rotated));
  mixed.set_token_count(9);
  EXPECT_EQ(e->Resume(mixed).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A window that has read other tokens than the state says.
  state->set_token_count(10);
  EXPECT_EQ(e->Resume(*state).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->sequences(), 0);
}

TEST_P(ResidentExecutorTest, PrefixReadsMatchTheModel) {
  if (model_->description().prefix_length == 0) {
    GTEST_SKIP() << "no prefix encoder";
  }
  // Passes of 16 tokens: the first pass of a prefix read grows to hold the
  // whole encoder (M = 64), the rest are causal.
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/4,
                                                    /*prefill_chunk=*/16);
  ASSERT_NE(e, nullptr);
  for (const PrefillMode mode :
       {PrefillMode::kPrefix, PrefillMode::kPrefixReadTwice,
        PrefillMode::kPrefixUnpadded}) {
    for (const int n : {5, 40, 64, 100}) {
      SCOPED_TRACE(::testing::Message() << static_cast<int>(mode) << " " << n);
      const std::vector<int32_t> tokens = RandomTokens(n, kExecutorVocab, n);
      std::unique_ptr<SequenceState> state = model_->NewState();
      ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                           model_->Prefill(tokens, *state, mode));
      ASSERT_OK_AND_ASSIGN(StackedModel::PrefixRead read,
                           stacked_->MakePrefixRead(tokens, mode, 0));
      ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
      ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                           e->Prefill(slot, read.input, &read.encoding));
      EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> saved, e->Save(slot));
      EXPECT_EQ(saved->token_count(), state->token_count());
      for (int l = 0; l < saved->num_layers(); ++l) {
        EXPECT_LE(
            testing::ExcessOverSummationOrder(LayerFloats(saved->layer(l)),
                                              LayerFloats(state->layer(l))),
            0.0)
            << l;
      }
      // A second prefix read of the same sequence is refused, unchanged.
      EXPECT_EQ(e->Prefill(slot, read.input, &read.encoding).status().code(),
                absl::StatusCode::kFailedPrecondition);
      ASSERT_OK_AND_ASSIGN(int64_t count, e->TokenCount(slot));
      EXPECT_EQ(count, state->token_count());
      ASSERT_OK(e->Release(slot));
    }
  }
}

TEST_P(ResidentExecutorTest, AFullKvCacheIsRefusedBeforeAnythingRuns) {
  if (GetParam() != "llama") GTEST_SKIP() << "Llama's paged KV cache";
  // 6 blocks of 5 tokens: 30 tokens for all slots; odd block size, so
  // blocks fill mid-pass and mid-step.
  std::unique_ptr<ResidentExecutor> e =
      NewExecutor(/*slots=*/3, /*prefill_chunk=*/7, /*kv_cache_tokens=*/30,
                  /*kv_block_size=*/5);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->free_kv_blocks(), 6);
  const std::vector<int32_t> prompt = RandomTokens(12, kExecutorVocab, 31);
  ASSERT_OK_AND_ASSIGN(SlotId a, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId b, e->NewSequence());
  ASSERT_OK(e->Prefill(a, prompt));  // 3 blocks
  ASSERT_OK(e->Prefill(b, prompt));  // 3 blocks: the pool is full
  EXPECT_EQ(e->free_kv_blocks(), 0);
  // 3 more tokens fit a's last block; 4 need a block nobody has.
  EXPECT_EQ(e->Prefill(a, RandomTokens(4, kExecutorVocab, 5)).status().code(),
            absl::StatusCode::kResourceExhausted);
  const std::vector<SlotId> ab = {a, b};
  const std::vector<int32_t> two = {1, 2};
  for (int i = 0; i < 3; ++i) ASSERT_OK(e->StepLogits(two, ab));  // 15 each
  EXPECT_EQ(e->StepLogits(two, ab).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(e->IsDamaged(a));
  EXPECT_FALSE(e->IsDamaged(b));
  ASSERT_OK_AND_ASSIGN(int64_t count, e->TokenCount(a));
  EXPECT_EQ(count, 15);
  // The refused calls changed nothing: a continues as the model does.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> after, e->Save(a));
  std::unique_ptr<SequenceState> state = model_->NewState();
  ASSERT_OK(model_->Prefill(prompt, *state, PrefillMode::kCausal));
  for (int i = 0; i < 3; ++i) ASSERT_OK(model_->Step(1, *state));
  for (int l = 0; l < after->num_layers(); ++l) {
    EXPECT_LE(testing::ExcessOverSummationOrder(LayerFloats(after->layer(l)),
                                                LayerFloats(state->layer(l))),
              0.0)
        << l;
  }
  // A state needing more blocks than are free is refused on Resume with
  // no slot taken; a released sequence's blocks serve the next one.
  EXPECT_EQ(e->Resume(*after).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(e->sequences(), 2);
  ASSERT_OK(e->Release(b));
  EXPECT_EQ(e->free_kv_blocks(), 3);
  ASSERT_OK_AND_ASSIGN(SlotId resumed, e->Resume(*after));
  EXPECT_EQ(e->free_kv_blocks(), 0);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> back, e->Save(resumed));
  for (int l = 0; l < back->num_layers(); ++l) {
    EXPECT_EQ(LayerFloats(back->layer(l)), LayerFloats(after->layer(l))) << l;
  }
  ASSERT_OK(e->Release(a));
  ASSERT_OK(e->Release(resumed));
  EXPECT_EQ(e->free_kv_blocks(), 6);
}

// A feed-forward layer the executor has no form of: refused by name, so a
// model holding one stays on the offload path.
class UnknownFeedForward final : public FeedForward {
 public:
  absl::Status Forward(absl::Span<const float>, int64_t,
                       absl::Span<float>) const override {
    return absl::OkStatus();
  }
};

TEST_P(ResidentExecutorTest, EveryLayerHasAFormAndAnUnknownOneIsRefused) {
  EXPECT_OK(SupportsResident(*stacked_));
  const UnknownFeedForward unknown;
  const absl::Status s = NewResidentFeedForward(unknown).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("no form"), std::string::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(Architectures, ResidentExecutorTest,
                         ::testing::Values("mamba2", "based", "jrt", "llama",
                                           "nemotron_h", "rat", "ratswa",
                                           "granite", "granitemoe"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param;
                         });

}  // namespace
}  // namespace twice::engine
