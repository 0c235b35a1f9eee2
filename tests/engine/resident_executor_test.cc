// ResidentExecutor on the CPU device against the host models, which
// compute the same equations without it (their own goldens hold them to
// the float64 references): prefill in passes, batched steps, 64 sequences
// at once, bf16 weights, prefix reads, and what a step brings back.
// States, checks and pools: resident_executor_checks_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/resident_executor_fixture.h"

namespace twice::engine::resident_test {
namespace {

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

// Sequences of several lengths, one of them resumed mid-document, read
// in one PrefillBatch with passes of 64 rows: passes shared by several
// sequences, a sequence across three passes, one ending a pass exactly.
// Each gets the model's logits and state.
TEST_P(ResidentExecutorTest, PrefillBatchGivesEachSequenceTheModelsRead) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/6,
                                                    /*prefill_chunk=*/64);
  ASSERT_NE(e, nullptr);
  const std::vector<int> lengths = {1, 40, 23, 150, 5, 9};
  std::vector<SlotId> slots;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::unique_ptr<SequenceState>> states;
  for (size_t i = 0; i < lengths.size(); ++i) {
    prompts.push_back(RandomTokens(lengths[i], kExecutorVocab, 40 + i));
    states.push_back(model_->NewState());
    ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
    slots.push_back(slot);
  }
  // Sequence 4 has read 37 tokens already (positions, rings and caches
  // past their start).
  const std::vector<int32_t> earlier = RandomTokens(37, kExecutorVocab, 77);
  ASSERT_OK(model_->Prefill(earlier, *states[4], PrefillMode::kCausal));
  ASSERT_OK(e->Prefill(slots[4], earlier));
  std::vector<absl::Span<const int32_t>> reads(prompts.begin(), prompts.end());
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, e->PrefillBatch(slots, reads));
  const size_t vocab_rows =
      static_cast<size_t>(model_->description().padded_vocab_size);
  ASSERT_EQ(got.size(), lengths.size() * vocab_rows);
  for (size_t i = 0; i < lengths.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_OK_AND_ASSIGN(
        std::vector<float> want,
        model_->Prefill(prompts[i], *states[i], PrefillMode::kCausal));
    const std::vector<float> row(got.begin() + i * vocab_rows,
                                 got.begin() + (i + 1) * vocab_rows);
    EXPECT_LE(testing::ExcessOverSummationOrder(row, want), 0.0);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<SequenceState> saved,
                         e->Save(slots[i]));
    EXPECT_EQ(saved->token_count(), states[i]->token_count());
    for (int l = 0; l < saved->num_layers(); ++l) {
      EXPECT_LE(
          testing::ExcessOverSummationOrder(LayerFloats(saved->layer(l)),
                                            LayerFloats(states[i]->layer(l))),
          0.0)
          << l;
    }
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
  const std::vector<std::vector<int32_t>> got =
      StepTogether(*batched, kSequences, kSteps);
  ASSERT_EQ(got.size(), static_cast<size_t>(kSequences));
  for (int i = 0; i < kSequences; ++i) {
    SCOPED_TRACE(i);
    // Alone: the same executor code with one slot, and the model itself.
    kernels::SamplingRule rule = BatchRule(i);
    EXPECT_EQ(got[i], ModelTokens(BatchPrompt(i), rule, kSteps));
    ASSERT_OK_AND_ASSIGN(SlotId slot, alone->NewSequence());
    ASSERT_OK_AND_ASSIGN(std::vector<float> logits,
                         alone->Prefill(slot, BatchPrompt(i)));
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

// Blocks of one row: the paged models' sequences outgrow their batch
// size's step tables (StepGraphs::FillTables makes them anew, wider) and
// refill them in place every step between; the tokens are the model's.
TEST_P(ResidentExecutorTest, StepsThroughGrowingStepTablesMatchTheModel) {
  std::unique_ptr<ResidentExecutor> e =
      NewExecutor(/*slots=*/3, /*prefill_chunk=*/64,
                  /*kv_cache_tokens=*/4096, /*kv_block_size=*/1);
  ASSERT_NE(e, nullptr);
  if (!e->has_paged_kv()) GTEST_SKIP() << "no paged state";
  constexpr int kSteps = 30;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SlotId> slots;
  std::vector<int32_t> next;
  const std::vector<kernels::SamplingRule> rules(3, ExecutorGreedy());
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(RandomTokens(4 + 7 * i, kExecutorVocab, 700 + i));
    ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
    ASSERT_OK_AND_ASSIGN(std::vector<float> logits,
                         e->Prefill(slot, prompts[i]));
    ASSERT_OK_AND_ASSIGN(const int32_t first, SampleOne(logits, rules[i]));
    slots.push_back(slot);
    next.push_back(first);
  }
  std::vector<std::vector<int32_t>> got(3);
  for (int i = 0; i < 3; ++i) got[i].push_back(next[i]);
  for (int step = 1; step < kSteps; ++step) {
    // Batches of 3 and of 2 in turn: each size keeps its own tables.
    const size_t b = step % 3 == 0 ? 2 : 3;
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids,
                         e->Step(absl::MakeConstSpan(next).subspan(0, b),
                                 absl::MakeConstSpan(slots).subspan(0, b),
                                 absl::MakeConstSpan(rules).subspan(0, b)));
    for (size_t i = 0; i < b; ++i) {
      next[i] = ids[i];
      got[i].push_back(ids[i]);
    }
  }
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i], ModelTokens(prompts[i], ExecutorGreedy(),
                                  static_cast<int>(got[i].size())));
  }
}

// Steps padded to their bucket (9 sequences run as 16 rows, the extra
// rows reading into the executor's own pad slots) give every sequence the
// model's tokens, and the pad slot is never handed out.
TEST_P(ResidentExecutorTest, PaddedStepsGiveEachSequenceTheModelsTokens) {
  ResidentExecutorOptions o;
  o.slots = 16;
  o.prefill_chunk = 64;
  o.kv_cache_tokens = 4096;
  o.step_padding = ResidentExecutorOptions::StepPadding::kAlways;
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<ResidentExecutor> e,
      ResidentExecutor::Create(*stacked_, NewCpuExecutorDevice(), o));
  constexpr int kSequences = 9, kSteps = 5;
  const std::vector<std::vector<int32_t>> got =
      StepTogether(*e, kSequences, kSteps);
  ASSERT_EQ(got.size(), static_cast<size_t>(kSequences));
  for (int i = 0; i < kSequences; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i], ModelTokens(BatchPrompt(i), BatchRule(i), kSteps));
  }
  // The 16 slots are the caller's; the pad slots are not among them.
  EXPECT_EQ(e->capacity(), 16);
  for (int i = kSequences; i < 16; ++i) ASSERT_OK(e->NewSequence().status());
  EXPECT_EQ(e->NewSequence().status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A mixture of experts included: a step routes on the device.
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
  EXPECT_EQ(after.bytes_to_host - before.bytes_to_host,
            16 * static_cast<int64_t>(sizeof(int32_t)));
  EXPECT_EQ(after.bytes_to_device - before.bytes_to_device, 0);
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

INSTANTIATE_TEST_SUITE_P(Architectures, ResidentExecutorTest,
                         ::testing::Values("mamba2", "based", "jrt", "llama",
                                           "nemotron_h", "rat", "ratswa",
                                           "granite", "granitemoe"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param;
                         });

}  // namespace
}  // namespace twice::engine::resident_test
