// Mamba2Executor on the CPU device: the resident executor's logic (slots,
// batching, checks, save/resume) against Mamba2Model, which computes the
// same equations without it (its own goldens hold it to the float64
// reference, golden_mamba2_test.cc).
#include "engine/executor/mamba2_executor.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/mamba2_model.h"
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

class Mamba2ExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string out = dir_->Sub("mamba2");
    ASSERT_OK(testing::WriteTinyModelOf("mamba2", out, 23, kExecutorVocab));
    // Sharper weights make a row reading another row's state show.
    ASSERT_OK(testing::SharpenWeights(out, 4.0f));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    model_ = testing::LoadOrDie(dir_->Sub("mamba2"));
    ASSERT_NE(model_, nullptr);
    mamba2_ = dynamic_cast<const Mamba2Model*>(model_.get());
    ASSERT_NE(mamba2_, nullptr);
  }

  std::unique_ptr<Mamba2Executor> NewExecutor(int32_t slots = 8,
                                              int64_t prefill_chunk = 64) {
    Mamba2ExecutorOptions o;
    o.slots = slots;
    o.prefill_chunk = prefill_chunk;
    absl::StatusOr<std::unique_ptr<Mamba2Executor>> e =
        Mamba2Executor::Create(*mamba2_, NewCpuExecutorDevice(), o);
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
  const Mamba2Model* mamba2_ = nullptr;
};

TempDir* Mamba2ExecutorTest::dir_ = nullptr;

TEST_F(Mamba2ExecutorTest, PrefillInPassesMatchesTheModel) {
  std::unique_ptr<Mamba2Executor> e = NewExecutor(/*slots=*/4,
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
      const auto& a = static_cast<const Mamba2State&>(saved->layer(l));
      const auto& b = static_cast<const Mamba2State&>(state->layer(l));
      EXPECT_LE(testing::ExcessOverSummationOrder(a.conv_tail(), b.conv_tail()),
                0.0)
          << l;
      EXPECT_LE(testing::ExcessOverSummationOrder(a.ssm(), b.ssm()), 0.0) << l;
    }
    ASSERT_OK(e->Release(slot));
  }
}

TEST_F(Mamba2ExecutorTest, BatchedStepsMatchTheModelsStepBatch) {
  std::unique_ptr<Mamba2Executor> e = NewExecutor(/*slots=*/6);
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

TEST_F(Mamba2ExecutorTest, SixtyFourSequencesGetTheTokensEachGetsAlone) {
  constexpr int kSequences = 64;
  constexpr int kSteps = 6;
  std::unique_ptr<Mamba2Executor> batched = NewExecutor(kSequences);
  std::unique_ptr<Mamba2Executor> alone = NewExecutor(1);
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

TEST_F(Mamba2ExecutorTest, AStepBringsBackOnlyTheIds) {
  std::unique_ptr<Mamba2Executor> e = NewExecutor(/*slots=*/16);
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
  EXPECT_EQ(after.bytes_to_host - before.bytes_to_host,
            16 * static_cast<int64_t>(sizeof(int32_t)));
  EXPECT_EQ(after.bytes_to_device - before.bytes_to_device, 0);
}

TEST_F(Mamba2ExecutorTest, StatesMoveBetweenTheExecutorAndTheModel) {
  std::unique_ptr<Mamba2Executor> e = NewExecutor();
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

TEST_F(Mamba2ExecutorTest, BadCallsAreRefusedWithTheSlotsUnchanged) {
  std::unique_ptr<Mamba2Executor> e = NewExecutor(/*slots=*/2);
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
    const auto& x = static_cast<const Mamba2State&>(after->layer(l));
    const auto& y = static_cast<const Mamba2State&>(before->layer(l));
    EXPECT_TRUE(std::equal(x.ssm().begin(), x.ssm().end(), y.ssm().begin()));
    EXPECT_TRUE(std::equal(x.conv_tail().begin(), x.conv_tail().end(),
                           y.conv_tail().begin()));
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

TEST_F(Mamba2ExecutorTest, ResumeRefusesStatesOfOtherModels) {
  std::unique_ptr<Mamba2Executor> e = NewExecutor();
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

TEST_F(Mamba2ExecutorTest, Bf16WeightsStayBf16AndMatchTheModel) {
  std::unique_ptr<Model> bf16 =
      testing::LoadOrDie(dir_->Sub("mamba2"), DType::kBF16);
  ASSERT_NE(bf16, nullptr);
  const auto& m = dynamic_cast<const Mamba2Model&>(*bf16);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Mamba2Executor> e,
                       Mamba2Executor::Create(m, NewCpuExecutorDevice()));
  const std::vector<int32_t> tokens = RandomTokens(30, kExecutorVocab, 77);
  std::unique_ptr<SequenceState> state = bf16->NewState();
  ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                       bf16->Prefill(tokens, *state, PrefillMode::kCausal));
  ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, e->Prefill(slot, tokens));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  // The projections are the loaded bf16 matrices, not widened copies.
  const Mamba2Model::Parameters p = m.parameters();
  EXPECT_EQ(p.layers[0].mixer.in_proj.dtype(), DType::kBF16);
  int64_t bf16_bytes = p.embedding.ByteSize();
  for (const auto& l : p.layers) {
    bf16_bytes += l.mixer.in_proj.ByteSize() + l.mixer.out_proj.ByteSize();
  }
  EXPECT_LT(e->weight_bytes(), bf16_bytes + bf16_bytes / 4);
}

}  // namespace
}  // namespace twice::engine
