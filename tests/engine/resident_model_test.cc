// ResidentModel on the CPU executor device: the residency rules of
// engine/state/sequence_state.h (a state read on the device is stale on the
// host until synced; the codec, Clone and host models sync it; slots are
// freed with their states) and its answers against Mamba2Model. The
// decode-loop and batching equivalences run in step_batch_test.cc
// ("mamba2-resident").
#include "engine/executor/resident_model.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/models/mamba2_model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::RandomTokens;
using testing::TempDir;

constexpr int kResidentVocab = 300;

class ResidentModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_OK(testing::WriteTinyModelOf("mamba2", dir_->Sub("mamba2"), 31,
                                        kResidentVocab));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("mamba2"), 4.0f));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    host_ = testing::LoadOrDie(dir_->Sub("mamba2"));
    ASSERT_NE(host_, nullptr);
    resident_ = NewResident(4);
    ASSERT_NE(resident_, nullptr);
  }

  std::unique_ptr<ResidentModel> NewResident(int32_t slots,
                                             bool share_prefill_passes = true) {
    ResidentExecutorOptions options;
    options.slots = slots;
    absl::StatusOr<std::unique_ptr<ResidentModel>> m = ResidentModel::Create(
        testing::LoadOrDie(dir_->Sub("mamba2")), NewCpuExecutorDevice(),
        options, share_prefill_passes);
    EXPECT_OK(m);
    return m.ok() ? *std::move(m) : nullptr;
  }

  static TempDir* dir_;
  std::unique_ptr<Model> host_;
  std::unique_ptr<ResidentModel> resident_;
};

TempDir* ResidentModelTest::dir_ = nullptr;

TEST_F(ResidentModelTest, ReadsMatchTheHostModelAndStayOnTheDevice) {
  const std::vector<int32_t> prompt = RandomTokens(90, kResidentVocab, 1);
  auto on_device = resident_->NewState();
  auto on_host = host_->NewState();
  ASSERT_OK_AND_ASSIGN(
      std::vector<float> got,
      resident_->Prefill(prompt, *on_device, PrefillMode::kCausal));
  ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                       host_->Prefill(prompt, *on_host, PrefillMode::kCausal));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  EXPECT_EQ(on_device->token_count(), 90);
  ASSERT_NE(on_device->residency(), nullptr);
  EXPECT_TRUE(on_device->host_stale());
  EXPECT_EQ(resident_->executor().sequences(), 1);
  for (int32_t t : {4, 99, 250}) {
    ASSERT_OK_AND_ASSIGN(got, resident_->Step(t, *on_device));
    ASSERT_OK_AND_ASSIGN(want, host_->Step(t, *on_host));
    EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  }
  // The codec syncs the host layers first: the blob is the host model's.
  const std::string blob = EncodeState(*on_device);
  EXPECT_FALSE(on_device->host_stale());
  auto decoded = host_->NewState();
  ASSERT_OK(DecodeStateInto(blob, *decoded));
  EXPECT_EQ(decoded->token_count(), 93);
  ASSERT_OK_AND_ASSIGN(got, host_->Step(7, *decoded));
  ASSERT_OK_AND_ASSIGN(want, host_->Step(7, *on_host));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
}

TEST_F(ResidentModelTest, CloneIsAHostCopyAndAHostReadTakesTheStateHome) {
  auto state = resident_->NewState();
  ASSERT_OK(resident_->Prefill(RandomTokens(20, kResidentVocab, 2), *state,
                               PrefillMode::kCausal));
  auto copy = state->Clone();
  EXPECT_EQ(copy->residency(), nullptr);
  EXPECT_FALSE(copy->damaged());
  EXPECT_EQ(copy->token_count(), 20);
  // The clone continues on the host like the original on the device.
  ASSERT_OK_AND_ASSIGN(std::vector<float> host_logits, host_->Step(11, *copy));
  ASSERT_OK_AND_ASSIGN(std::vector<float> device_logits,
                       resident_->Step(11, *state));
  EXPECT_LE(testing::ExcessOverSummationOrder(host_logits, device_logits), 0.0);
  // A host model reading the resident state syncs it and frees its slot;
  // the next device read uploads it again.
  ASSERT_OK_AND_ASSIGN(host_logits, host_->Step(12, *state));
  EXPECT_EQ(state->residency(), nullptr);
  EXPECT_EQ(resident_->executor().sequences(), 0);
  ASSERT_OK_AND_ASSIGN(std::vector<float> want, host_->Step(12, *copy));
  EXPECT_LE(testing::ExcessOverSummationOrder(host_logits, want), 0.0);
  ASSERT_OK_AND_ASSIGN(device_logits, resident_->Step(13, *state));
  ASSERT_OK_AND_ASSIGN(want, host_->Step(13, *copy));
  EXPECT_LE(testing::ExcessOverSummationOrder(device_logits, want), 0.0);
  EXPECT_EQ(state->token_count(), 23);
  EXPECT_EQ(resident_->executor().sequences(), 1);
}

TEST_F(ResidentModelTest, AFullPoolSpillsIdleStatesAndBringsThemBack) {
  // Six sequences through four slots: reading the fifth and sixth spills
  // the least recently used to the host; each comes back at its next read
  // and continues exactly like the host model's copy of it.
  constexpr int kSequences = 6;
  std::vector<std::unique_ptr<SequenceState>> device, host;
  for (int i = 0; i < kSequences; ++i) {
    const std::vector<int32_t> prompt =
        RandomTokens(5 + 3 * i, kResidentVocab, 10 + i);
    device.push_back(resident_->NewState());
    host.push_back(host_->NewState());
    ASSERT_OK(resident_->Prefill(prompt, *device.back(), PrefillMode::kCausal));
    ASSERT_OK(host_->Prefill(prompt, *host.back(), PrefillMode::kCausal));
    EXPECT_LE(resident_->executor().sequences(), 4);
  }
  EXPECT_EQ(resident_->executor().sequences(), 4);
  // A spilled state still encodes its newest copy.
  auto decoded = host_->NewState();
  ASSERT_OK(DecodeStateInto(EncodeState(*device[0]), *decoded));
  EXPECT_EQ(decoded->token_count(), 5);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kSequences; ++i) {
      const int32_t token = static_cast<int32_t>((31 * i + 7 * round) % 250);
      ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                           resident_->Step(token, *device[i]));
      ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                           host_->Step(token, *host[i]));
      EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0)
          << "sequence " << i << ", round " << round;
      EXPECT_EQ(device[i]->token_count(), host[i]->token_count());
    }
  }
  // One read needing more slots than exist is refused, nothing changed.
  std::vector<SequenceState*> all;
  for (auto& state : device) all.push_back(state.get());
  const std::string before = EncodeState(*device[2]);
  const absl::Status full =
      resident_->StepBatch(std::vector<int32_t>(kSequences, 1), all).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(EncodeState(*device[2]), before);
  // Four at once fit (the others spill).
  ASSERT_OK(resident_->StepBatch(std::vector<int32_t>(4, 1),
                                 absl::MakeConstSpan(all).subspan(2, 4)));
  // Slots are freed with their states; a state may outlive its model.
  device.pop_back();
  EXPECT_LE(resident_->executor().sequences(), 3);
  std::unique_ptr<SequenceState> last = std::move(device.back());
  device.clear();
  EXPECT_EQ(resident_->executor().sequences(), 1);
  resident_.reset();
  EXPECT_OK(last->SyncToHost());
  EXPECT_EQ(last->token_count(), host[4]->token_count() + 1);
}

// Two slots held by A (older) and B; a step of {C, A} with C on the host
// must spill B for C, never A, whatever the order of the call's states:
// the same bytes cross as for {A, C}.
TEST_F(ResidentModelTest, ABatchNeverSpillsItsOwnStates) {
  int64_t moved[2];
  for (int order = 0; order < 2; ++order) {
    std::unique_ptr<ResidentModel> two = NewResident(2);
    ASSERT_NE(two, nullptr);
    auto a = two->NewState(), b = two->NewState(), c = host_->NewState();
    ASSERT_OK(two->Prefill(RandomTokens(9, kResidentVocab, 60), *a,
                           PrefillMode::kCausal));
    ASSERT_OK(two->Prefill(RandomTokens(7, kResidentVocab, 61), *b,
                           PrefillMode::kCausal));
    ASSERT_OK(host_->Prefill(RandomTokens(5, kResidentVocab, 62), *c,
                             PrefillMode::kCausal));
    const DeviceTraffic before = two->executor().traffic();
    const std::vector<SequenceState*> batch =
        order == 0 ? std::vector<SequenceState*>{c.get(), a.get()}
                   : std::vector<SequenceState*>{a.get(), c.get()};
    ASSERT_OK(two->StepBatch(std::vector<int32_t>{3, 4}, batch));
    const DeviceTraffic after = two->executor().traffic();
    moved[order] = (after.bytes_to_host - before.bytes_to_host) +
                   (after.bytes_to_device - before.bytes_to_device);
  }
  EXPECT_EQ(moved[0], moved[1]);
}

TEST_F(ResidentModelTest, RefusedReadsChangeNothing) {
  auto state = resident_->NewState();
  ASSERT_OK(resident_->Prefill(RandomTokens(8, kResidentVocab, 3), *state,
                               PrefillMode::kCausal));
  const std::string before = EncodeState(*state);
  EXPECT_EQ(resident_->Step(kResidentVocab + 3, *state).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resident_
                ->Prefill(RandomTokens(3, kResidentVocab, 4), *state,
                          PrefillMode::kPrefix)
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  kernels::SamplingRule bad;
  bad.temperature = -1.0f;
  SequenceState* one[] = {state.get()};
  EXPECT_EQ(resident_
                ->StepBatchSampled(std::vector<int32_t>{1}, one,
                                   absl::MakeConstSpan(&bad, 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  SequenceState other("another-model", {});
  EXPECT_EQ(resident_->Step(1, other).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncodeState(*state), before);
  EXPECT_EQ(state->token_count(), 8);
}

// PrefillBatch: a batch of good reads gets the host model's logits and
// states in shared passes; a batch holding a bad read (another model's
// state, an id out of range, the same state twice) is read one by one, so
// only the bad read fails and a state read twice reads both token lists
// in order.
TEST_F(ResidentModelTest, PrefillBatchGivesEachReadItsOwnResult) {
  std::unique_ptr<ResidentModel> resident = NewResident(8);
  ASSERT_NE(resident, nullptr);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(RandomTokens(3 + 9 * i, kResidentVocab, 20 + i));
  }
  std::vector<std::unique_ptr<SequenceState>> device, host;
  for (int i = 0; i < 4; ++i) {
    device.push_back(resident->NewState());
    host.push_back(host_->NewState());
  }
  std::vector<SequenceState*> states;
  for (auto& s : device) states.push_back(s.get());
  const std::vector<absl::Span<const int32_t>> reads(prompts.begin(),
                                                     prompts.end());
  std::vector<absl::StatusOr<std::vector<float>>> got =
      resident->PrefillBatch(reads, states);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    ASSERT_OK(got[i]);
    ASSERT_OK_AND_ASSIGN(
        std::vector<float> want,
        host_->Prefill(prompts[i], *host[i], PrefillMode::kCausal));
    EXPECT_LE(testing::ExcessOverSummationOrder(*got[i], want), 0.0);
    EXPECT_EQ(device[i]->token_count(), host[i]->token_count());
    EXPECT_TRUE(device[i]->host_stale());
  }

  EXPECT_EQ(resident->batched_prefills(), 4);

  // Batches the executor refuses as a whole are read one by one: a good
  // read with another model's state, with an id out of range, or with the
  // same state again (which then reads both lists, in order).
  SequenceState other("another-model", {});
  const std::vector<int32_t> bad_id = {1, kResidentVocab};
  struct Case {
    const char* name;
    std::vector<absl::Span<const int32_t>> reads;
    std::vector<SequenceState*> states;
    absl::StatusCode second;
  };
  const std::vector<Case> cases = {{"another model",
                                    {prompts[0], prompts[1]},
                                    {states[0], &other},
                                    absl::StatusCode::kFailedPrecondition},
                                   {"bad id",
                                    {prompts[1], bad_id},
                                    {states[1], states[2]},
                                    absl::StatusCode::kInvalidArgument},
                                   {"same state twice",
                                    {prompts[2], prompts[3]},
                                    {states[3], states[3]},
                                    absl::StatusCode::kOk}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    got = resident->PrefillBatch(c.reads, c.states);
    ASSERT_EQ(got.size(), 2u);
    ASSERT_OK(got[0]);
    const int first = c.states[0] == states[0]   ? 0
                      : c.states[0] == states[1] ? 1
                                                 : 3;
    const std::vector<int32_t> first_tokens(c.reads[0].begin(),
                                            c.reads[0].end());
    ASSERT_OK_AND_ASSIGN(
        std::vector<float> want,
        host_->Prefill(first_tokens, *host[first], PrefillMode::kCausal));
    EXPECT_LE(testing::ExcessOverSummationOrder(*got[0], want), 0.0);
    EXPECT_EQ(got[1].status().code(), c.second);
    if (c.second == absl::StatusCode::kOk) {
      const std::vector<int32_t> second_tokens(c.reads[1].begin(),
                                               c.reads[1].end());
      ASSERT_OK_AND_ASSIGN(
          want, host_->Prefill(second_tokens, *host[3], PrefillMode::kCausal));
      EXPECT_LE(testing::ExcessOverSummationOrder(*got[1], want), 0.0);
    }
  }
  // None of them shared a pass; every state continues as the host's.
  EXPECT_EQ(resident->batched_prefills(), 4);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_FALSE(device[i]->damaged());
    EXPECT_EQ(device[i]->token_count(), host[i]->token_count());
    ASSERT_OK_AND_ASSIGN(std::vector<float> stepped,
                         resident->Step(7, *device[i]));
    ASSERT_OK_AND_ASSIGN(std::vector<float> want, host_->Step(7, *host[i]));
    EXPECT_LE(testing::ExcessOverSummationOrder(stepped, want), 0.0);
  }
}

// Short reads from many threads at once: each gets the logits it gets
// alone, and (unless sharing is off) reads that arrived while the
// executor was busy shared batches.
class ResidentModelSharingTest : public ResidentModelTest,
                                 public ::testing::WithParamInterface<bool> {};

TEST_P(ResidentModelSharingTest, ConcurrentShortReads) {
  const bool share = GetParam();
  std::unique_ptr<ResidentModel> resident = NewResident(16, share);
  ASSERT_NE(resident, nullptr);
  constexpr int kThreads = 8;
  constexpr int kRounds = 10;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> want;
  for (int i = 0; i < kThreads; ++i) {
    prompts.push_back(RandomTokens(3 + 5 * i, kResidentVocab, 60 + i));
    auto state = host_->NewState();
    ASSERT_OK_AND_ASSIGN(
        std::vector<float> logits,
        host_->Prefill(prompts[i], *state, PrefillMode::kCausal));
    want.push_back(logits);
  }
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::unique_ptr<SequenceState>> states;
    for (int i = 0; i < kThreads; ++i) states.push_back(resident->NewState());
    std::vector<absl::StatusOr<std::vector<float>>> got(
        kThreads, absl::UnknownError("not run"));
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) std::this_thread::yield();
        got[i] =
            resident->Prefill(prompts[i], *states[i], PrefillMode::kCausal);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kThreads; ++i) {
      ASSERT_OK(got[i]) << round << " " << i;
      EXPECT_LE(testing::ExcessOverSummationOrder(*got[i], want[i]), 0.0)
          << round << " " << i;
      EXPECT_EQ(states[i]->token_count(),
                static_cast<int64_t>(prompts[i].size()));
    }
  }
  std::printf("%lld of %d reads ran in shared batches\n",
              static_cast<long long>(resident->batched_prefills()),
              kThreads * kRounds);
  if (share) {
    EXPECT_GT(resident->batched_prefills(), 0);
  } else {
    EXPECT_EQ(resident->batched_prefills(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Sharing, ResidentModelSharingTest, ::testing::Bool());

// JRT-RNN's prefix reads run on the device with the host model's input
// and checks: the same logits and state, and a prefix read of a state that
// has read tokens is refused unchanged.
TEST(ResidentJrtModelTest, PrefixReadsRunOnTheDeviceLikeTheHostModel) {
  TempDir dir;
  ASSERT_OK(
      testing::WriteTinyModelOf("jrt", dir.Sub("jrt"), 37, kResidentVocab));
  std::unique_ptr<Model> host = testing::LoadOrDie(dir.Sub("jrt"));
  ASSERT_NE(host, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ResidentModel> resident,
                       ResidentModel::Create(testing::LoadOrDie(dir.Sub("jrt")),
                                             NewCpuExecutorDevice()));
  const std::vector<int32_t> doc = RandomTokens(30, kResidentVocab, 8);
  auto on_device = resident->NewState();
  auto on_host = host->NewState();
  ASSERT_OK_AND_ASSIGN(
      std::vector<float> got,
      resident->Prefill(doc, *on_device, PrefillMode::kPrefixReadTwice));
  ASSERT_OK_AND_ASSIGN(
      std::vector<float> want,
      host->Prefill(doc, *on_host, PrefillMode::kPrefixReadTwice));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  EXPECT_EQ(on_device->token_count(), on_host->token_count());
  EXPECT_TRUE(on_device->host_stale());
  ASSERT_OK_AND_ASSIGN(got, resident->Step(11, *on_device));
  ASSERT_OK_AND_ASSIGN(want, host->Step(11, *on_host));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);

  const std::string before = EncodeState(*on_device);
  EXPECT_EQ(
      resident->Prefill(doc, *on_device, PrefillMode::kPrefix).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncodeState(*on_device), before);
}

// Llama's KV cache is a pool of blocks: a read that needs blocks when none
// is free spills the least recently used idle state (there are slots to
// spare, the blocks run out), which comes back at its next read and
// continues like the host model's copy; a read needing more blocks than
// the whole pool is refused with its state unchanged.
TEST(ResidentLlamaModelTest, AFullKvCacheSpillsIdleStatesAndBringsThemBack) {
  TempDir dir;
  ASSERT_OK(
      testing::WriteTinyModelOf("llama", dir.Sub("llama"), 41, kResidentVocab));
  ASSERT_OK(testing::SharpenWeights(dir.Sub("llama"), 4.0f));
  std::unique_ptr<Model> host = testing::LoadOrDie(dir.Sub("llama"));
  ASSERT_NE(host, nullptr);
  ResidentExecutorOptions options;
  options.slots = 8;
  options.kv_cache_tokens = 48;  // 3 blocks of 16
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<ResidentModel> resident,
      ResidentModel::Create(testing::LoadOrDie(dir.Sub("llama")),
                            NewCpuExecutorDevice(), options));
  constexpr int kSequences = 3;
  std::vector<std::unique_ptr<SequenceState>> device, on_host;
  for (int i = 0; i < kSequences; ++i) {
    // 17..19 tokens: two blocks each, so every second sequence spills.
    const std::vector<int32_t> prompt =
        RandomTokens(17 + i, kResidentVocab, 60 + i);
    device.push_back(resident->NewState());
    on_host.push_back(host->NewState());
    ASSERT_OK(resident->Prefill(prompt, *device.back(), PrefillMode::kCausal));
    ASSERT_OK(host->Prefill(prompt, *on_host.back(), PrefillMode::kCausal));
    EXPECT_EQ(resident->executor().sequences(), 1);
  }
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kSequences; ++i) {
      const int32_t token = static_cast<int32_t>((17 * i + 5 * round) % 250);
      ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                           resident->Step(token, *device[i]));
      ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                           host->Step(token, *on_host[i]));
      EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0)
          << "sequence " << i << ", round " << round;
    }
  }
  const std::string before = EncodeState(*device[0]);
  const absl::Status too_long =
      resident
          ->Prefill(RandomTokens(40, kResidentVocab, 9), *device[0],
                    PrefillMode::kCausal)
          .status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kResourceExhausted) << too_long;
  EXPECT_FALSE(device[0]->damaged());
  EXPECT_EQ(EncodeState(*device[0]), before);
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, resident->Step(3, *device[0]));
  ASSERT_OK_AND_ASSIGN(std::vector<float> want, host->Step(3, *on_host[0]));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
}

}  // namespace
}  // namespace twice::engine
