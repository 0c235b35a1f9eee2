// ResidentExecutor on the CPU device: states crossing to the host model
// and back, calls refused with every slot unchanged, a full KV pool refused
// before anything runs, and the layers it has no form of.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/resident_executor_fixture.h"

namespace twice::engine::resident_test {
namespace {

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
  // PrefillBatch: a bad id or an empty list in sequence 1, a slot twice,
  // lists and slots that do not pair up, no sequence.
  const std::vector<int32_t> fine = {1, 2, 3}, bad_id = {4, kExecutorVocab};
  const std::vector<absl::Span<const int32_t>> with_bad = {fine, bad_id};
  const std::vector<absl::Span<const int32_t>> with_empty = {fine, {}};
  const std::vector<absl::Span<const int32_t>> two = {fine, fine};
  const std::vector<absl::Span<const int32_t>> one = {fine};
  for (const auto* reads : {&with_bad, &with_empty}) {
    absl::Status s = e->PrefillBatch(ab, *reads).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("sequence 1"), std::string::npos) << s;
  }
  EXPECT_EQ(e->PrefillBatch(twice, two).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->PrefillBatch(ab, one).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->PrefillBatch({}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(int64_t b_count, e->TokenCount(b));
  EXPECT_EQ(b_count, 0);

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
  // So does a batch where one sequence fits (b's 3 tokens) and one does
  // not: nothing is read, nothing taken.
  const std::vector<int32_t> three = RandomTokens(3, kExecutorVocab, 6);
  const std::vector<int32_t> four = RandomTokens(4, kExecutorVocab, 7);
  const std::vector<absl::Span<const int32_t>> reads = {four, three};
  EXPECT_EQ(e->PrefillBatch(std::vector<SlotId>{a, b}, reads).status().code(),
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

// Step graphs on the CPU device: every model (paged ones and mixtures of
// experts included) tries to record its batch size's second step, learns
// that the CPU records no graphs (UNIMPLEMENTED), and runs that step and
// every later one as it is.
TEST_P(ResidentExecutorTest, StepGraphsSayWhyTheyAreOff) {
  std::unique_ptr<ResidentExecutor> e = NewExecutor(/*slots=*/4);
  ASSERT_NE(e, nullptr);
  EXPECT_OK(e->step_graphs_status());
  std::vector<SlotId> slots;
  for (int b = 0; b < 2; ++b) {
    ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
    ASSERT_OK(e->Prefill(slot, RandomTokens(4, kExecutorVocab, 60 + b)));
    slots.push_back(slot);
  }
  const std::vector<kernels::SamplingRule> rules(2, ExecutorGreedy());
  std::vector<int32_t> tokens = {5, 6};
  for (int step = 0; step < 3; ++step) {
    ASSERT_OK_AND_ASSIGN(tokens, e->Step(tokens, slots, rules));
  }
  EXPECT_EQ(e->step_graphs_status().code(), absl::StatusCode::kUnimplemented)
      << e->step_graphs_status();
  EXPECT_EQ(e->step_graphs(), 0);
  EXPECT_EQ(e->device().traffic().graph_launches, 0);
}

TEST_P(ResidentExecutorTest, EveryLayerHasAFormAndAnUnknownOneIsRefused) {
  EXPECT_OK(SupportsResident(*stacked_));
  const UnknownFeedForward unknown;
  const absl::Status s = NewResidentFeedForward(unknown).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("no form"), std::string::npos) << s;
}

}  // namespace
}  // namespace twice::engine::resident_test
