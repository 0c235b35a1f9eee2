// Model::StepBatch (one batched weight pass for B sequences) against B
// single steps, for every architecture (based, jrt, mamba2, rat, llama),
// and the engine's DecodeLoop against Generate:
//   - batched logits equal single-step logits within float tolerance
//     (2e-5 absolute + 1e-4 relative: the GEMM with m = B may sum in another
//     order than m = 1), and the states they leave continue alike;
//   - sequences of different lengths, also across the sliding window, and a
//     JRT sequence that began with a prefix read;
//   - all or nothing: a bad token in one row changes no state;
//   - concurrent sequences in one DecodeLoop (6 in batches of 4, and 64 in
//     batches of up to 64) produce exactly the greedy and the seeded
//     sampled tokens Generate produces for each alone;
//   - a resident model with fewer slots than a batch steps it in parts,
//     and a sequence the model refuses fails alone, not its batch;
//   - a sequence whose cancel becomes visible is never stepped again.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "engine/executor/resident_model.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/runtime/decode_loop.h"
#include "engine/runtime/generator.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::LoadOrDie;
using testing::RandomTokens;
using testing::TempDir;

constexpr int kStepBatchVocab = 300;

double MaxError(absl::Span<const float> got, absl::Span<const float> want) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) -
                                1e-4 * std::abs(double{want[i]}));
  }
  return worst;
}

class StepBatchTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const char* arch :
         {"based", "jrt", "mamba2", "rat", "llama", "nemotron_h"}) {
      const std::string out = dir_->Sub(arch);
      ASSERT_OK(testing::WriteTinyModelOf(arch, out, 11, kStepBatchVocab));
      // Sharper weights make batching mistakes (a row reading another
      // row's state) show in the logits.
      ASSERT_OK(testing::SharpenWeights(out, 4.0f));
    }
    // Granite-4.0-H with experts: a batch routes its rows to different
    // experts, and each row must get what it gets alone.
    ASSERT_OK(testing::WriteTinyModelOf("granitemoehybrid",
                                        dir_->Sub("granite_moe"), 11,
                                        kStepBatchVocab, "tiny-moe"));
    ASSERT_OK(testing::SharpenWeights(dir_->Sub("granite_moe"), 4.0f));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    // "<arch>-resident": the model behind the resident executor on the CPU
    // device (engine/executor/resident_model.h), through the same tests.
    std::string arch = GetParam();
    const bool resident = absl::EndsWith(arch, "-resident");
    if (resident) arch.resize(arch.size() - std::string("-resident").size());
    model_ = LoadOrDie(dir_->Sub(arch));
    if (resident && model_ != nullptr) {
      ResidentExecutorOptions options;
      options.slots = 128;
      absl::StatusOr<std::unique_ptr<ResidentModel>> wrapped =
          ResidentModel::Create(std::move(model_), NewCpuExecutorDevice(),
                                options);
      ASSERT_OK(wrapped);
      model_ = *std::move(wrapped);
    }
  }

  // A state that has read `n` random tokens (a prefix read first for jrt
  // when `prefix`).
  std::unique_ptr<SequenceState> Prepared(int n, uint64_t seed,
                                          bool prefix = false) {
    auto state = model_->NewState();
    const PrefillMode mode =
        prefix ? PrefillMode::kPrefix : PrefillMode::kCausal;
    EXPECT_TRUE(
        model_
            ->Prefill(RandomTokens(n, kStepBatchVocab - 1, seed), *state, mode)
            .ok());
    return state;
  }

  static TempDir* dir_;
  std::unique_ptr<Model> model_;
};

TempDir* StepBatchTest::dir_ = nullptr;

TEST_P(StepBatchTest, BatchedStepsEqualSingleSteps) {
  const bool jrt = GetParam() == "jrt";
  // Lengths before, on and past the sliding window (32), one of them long.
  const std::vector<int> lengths = {1, 5, 31, 32, 33, 90, 200};
  std::vector<std::unique_ptr<SequenceState>> batched, single;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const bool prefix = jrt && i == 5;
    batched.push_back(Prepared(lengths[i], 100 + i, prefix));
    single.push_back(Prepared(lengths[i], 100 + i, prefix));
  }
  const size_t width = model_->description().padded_vocab_size;
  std::vector<SequenceState*> rows;
  for (auto& state : batched) rows.push_back(state.get());
  for (int step = 0; step < 40; ++step) {
    const std::vector<int32_t> tokens = RandomTokens(
        static_cast<int>(rows.size()), kStepBatchVocab - 1, 500 + step);
    auto logits = model_->StepBatch(tokens, rows);
    ASSERT_OK(logits);
    ASSERT_EQ(logits->size(), rows.size() * width);
    for (size_t b = 0; b < rows.size(); ++b) {
      auto want = model_->Step(tokens[b], *single[b]);
      ASSERT_OK(want);
      ASSERT_LE(MaxError(absl::MakeConstSpan(*logits).subspan(b * width, width),
                         *want),
                2e-5)
          << "row " << b << " (" << lengths[b] << " tokens), step " << step;
      ASSERT_EQ(rows[b]->token_count(), single[b]->token_count());
    }
  }
  // The states left behind continue alike too (a chunked read, another
  // code path than the steps).
  const std::vector<int32_t> more = RandomTokens(50, kStepBatchVocab - 1, 77);
  for (size_t b = 0; b < rows.size(); ++b) {
    auto got = model_->Prefill(more, *batched[b], PrefillMode::kCausal);
    auto want = model_->Prefill(more, *single[b], PrefillMode::kCausal);
    ASSERT_OK(got);
    ASSERT_OK(want);
    EXPECT_LE(MaxError(*got, *want), 2e-5) << "state of row " << b;
  }
}

TEST_P(StepBatchTest, ABadRowChangesNoState) {
  auto a = Prepared(10, 1);
  auto b = Prepared(20, 2);
  const std::string before_a = EncodeState(*a), before_b = EncodeState(*b);
  SequenceState* rows[] = {a.get(), b.get()};
  const int32_t tokens[] = {5, kStepBatchVocab + 7};
  EXPECT_EQ(model_->StepBatch(tokens, rows).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeState(*a), before_a);
  EXPECT_EQ(EncodeState(*b), before_b);
  // One state twice in a batch would be read twice: refused.
  SequenceState* twice[] = {a.get(), a.get()};
  const int32_t ok_tokens[] = {5, 6};
  EXPECT_EQ(model_->StepBatch(ok_tokens, twice).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Holds a DecodeLoop's thread at the first token of the first sequence
// submitted, so that the test can submit the rest while the loop waits:
// the loop starts stepping on the first Submit, and without the gate a
// busy machine steps sequences alone or in whatever groups they arrive.
// Passed as the first sequence's `cancelled` predicate (polled on the
// loop thread before each token), then WaitUntilHeld, the other Submits,
// Open: the loop's first round holds the first sequence alone, its second
// every sequence. Declared after the loop, so that it opens (when a test
// stops early) before the loop's destructor joins its thread.
class SubmitGate {
 public:
  SubmitGate() : state_(std::make_shared<State>()) {}
  ~SubmitGate() { Open(); }
  SubmitGate(const SubmitGate&) = delete;
  SubmitGate& operator=(const SubmitGate&) = delete;

  std::function<bool()> Predicate() const {
    return [state = state_] {
      std::unique_lock<std::mutex> lock(state->mu);
      state->held = true;
      state->changed.notify_all();
      state->changed.wait(lock, [&] { return state->open; });
      return false;
    };
  }
  // Blocks until the loop thread waits at the gate.
  void WaitUntilHeld() const {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->changed.wait(lock, [&] { return state_->held; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->open = true;
    state_->changed.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable changed;
    bool held = false;
    bool open = false;
  };
  std::shared_ptr<State> state_;
};

// `sequences` submitted to one DecodeLoop (batches of at most `max_batch`)
// give each sequence exactly the tokens Generate gives it alone; odd ones
// sample (each with its own seed), so the batch's one SampleRows call must
// give each the draws it gets alone.
void ExpectLoopMatchesGenerate(
    const Model& model, int sequences, int max_batch, int max_tokens,
    const std::function<std::unique_ptr<SequenceState>(int)>& prepared) {
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.stop_at_eos = false;
  const auto options_of = [&](int i) {
    GenerateOptions o = options;
    if (i % 2 == 1) {
      o.sampling = {.temperature = 0.8f,
                    .top_k = 20,
                    .top_p = 0.9f,
                    .seed = 1000u + static_cast<uint64_t>(i)};
    }
    return o;
  };
  std::vector<std::vector<int32_t>> want(sequences);
  for (int i = 0; i < sequences; ++i) {
    auto state = prepared(i);
    auto result =
        Generate(model, *state, RandomTokens(3, kStepBatchVocab - 1, i),
                 options_of(i), [&](const GeneratedPiece& piece) {
                   want[i].insert(want[i].end(), piece.tokens.begin(),
                                  piece.tokens.end());
                   return true;
                 });
    ASSERT_OK(result);
  }

  // Every prompt is read first, then the loop's first round waits at a gate
  // until all are submitted, so its second round steps them all.
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<std::vector<float>> prompt_logits;
  for (int i = 0; i < sequences; ++i) {
    states.push_back(prepared(i));
    auto logits = model.Prefill(RandomTokens(3, kStepBatchVocab - 1, i),
                                *states.back(), PrefillMode::kCausal);
    ASSERT_OK(logits);
    prompt_logits.push_back(*std::move(logits));
  }
  DecodeLoop loop(model, DecodeLoopOptions{.max_batch = max_batch});
  SubmitGate gate;
  std::vector<std::shared_ptr<DecodeStream>> streams;
  for (int i = 0; i < sequences; ++i) {
    auto stream =
        loop.Submit(std::move(states[i]), prompt_logits[i], options_of(i),
                    i == 0 ? gate.Predicate() : nullptr);
    ASSERT_OK(stream);
    streams.push_back(*stream);
    if (i == 0) gate.WaitUntilHeld();
  }
  gate.Open();
  for (int i = 0; i < sequences; ++i) {
    std::vector<int32_t> got;
    DecodeEvent event;
    while (streams[i]->Next(&event)) {
      got.insert(got.end(), event.piece.tokens.begin(),
                 event.piece.tokens.end());
      if (event.finished) {
        EXPECT_OK(event.status);
        EXPECT_EQ(event.result.finish_reason, "length");
        EXPECT_EQ(event.result.tokens_decoded, max_tokens);
      }
    }
    EXPECT_EQ(got, want[i]) << "sequence " << i;
  }
  const DecodeLoopStats stats = loop.stats();
  EXPECT_EQ(stats.tokens_decoded, int64_t{sequences} * max_tokens);
  EXPECT_EQ(stats.active, 0);
  // The round after the gate opens holds every sequence.
  EXPECT_EQ(stats.max_batch, std::min(sequences, max_batch));
}

TEST_P(StepBatchTest, DecodeLoopMatchesGenerateForConcurrentSequences) {
  ExpectLoopMatchesGenerate(
      *model_, 6, 4, 24, [&](int i) { return Prepared(10 + 13 * i, 900 + i); });
}

TEST_P(StepBatchTest, SixtyFourConcurrentSequencesGetTheirOwnTokens) {
  ExpectLoopMatchesGenerate(
      *model_, 64, 64, 6, [&](int i) { return Prepared(5 + i % 9, 2000 + i); });
}

// A resident model with fewer slots than the loop's batches: each batch
// is refused as a whole before anything runs and stepped in halves, and
// every sequence still gets the tokens it gets alone.
TEST_P(StepBatchTest, ABatchLargerThanTheResidentSlotsIsSteppedInParts) {
  std::string arch = GetParam();
  if (!absl::EndsWith(arch, "-resident")) GTEST_SKIP() << "not resident";
  arch.resize(arch.size() - std::string("-resident").size());
  ResidentExecutorOptions options;
  options.slots = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ResidentModel> small,
                       ResidentModel::Create(LoadOrDie(dir_->Sub(arch)),
                                             NewCpuExecutorDevice(), options));
  ExpectLoopMatchesGenerate(*small, 6, 4, 8, [&](int i) {
    auto state = small->NewState();
    EXPECT_OK(
        small->Prefill(RandomTokens(10 + 3 * i, kStepBatchVocab - 1, 700 + i),
                       *state, PrefillMode::kCausal));
    return state;
  });
}

// Sequences whose states the model refuses (another architecture's, and
// one damaged earlier) make their batch fail as a whole; the loop steps
// the batch in parts, so those sequences end with the model's error and
// the others get the tokens they get alone. A gate holds the loop in its
// first round (the first sequence alone) until all are submitted, so its
// second round steps all the sequences together.
TEST_P(StepBatchTest, SequencesTheModelRefusesFailAlone) {
  const std::string foreign_arch =
      absl::StartsWith(GetParam(), "llama") ? "mamba2" : "llama";
  std::unique_ptr<Model> foreign = LoadOrDie(dir_->Sub(foreign_arch));
  ASSERT_NE(foreign, nullptr);
  GenerateOptions options;
  options.max_tokens = 6;
  options.stop_at_eos = false;
  constexpr int kSequences = 6;
  constexpr int kForeign = 2;
  constexpr int kDamaged = 4;
  std::vector<std::vector<int32_t>> want(kSequences);
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<std::vector<float>> logits;
  for (int i = 0; i < kSequences; ++i) {
    const std::vector<int32_t> prompt =
        RandomTokens(3, kStepBatchVocab - 1, 40 + i);
    if (i == kForeign) {
      states.push_back(foreign->NewState());
      ASSERT_OK_AND_ASSIGN(
          logits.emplace_back(),
          foreign->Prefill(prompt, *states.back(), PrefillMode::kCausal));
      continue;
    }
    if (i != kDamaged) {
      auto alone = Prepared(7 + i, 60 + i);
      ASSERT_OK(Generate(*model_, *alone, prompt, options,
                         [&](const GeneratedPiece& piece) {
                           want[i].insert(want[i].end(), piece.tokens.begin(),
                                          piece.tokens.end());
                           return true;
                         }));
    }
    states.push_back(Prepared(7 + i, 60 + i));
    ASSERT_OK_AND_ASSIGN(
        logits.emplace_back(),
        model_->Prefill(prompt, *states.back(), PrefillMode::kCausal));
    if (i == kDamaged) states.back()->MarkDamaged();
  }
  DecodeLoop loop(*model_, DecodeLoopOptions{.max_batch = 8});
  SubmitGate gate;
  std::vector<std::shared_ptr<DecodeStream>> streams;
  for (int i = 0; i < kSequences; ++i) {
    absl::StatusOr<std::shared_ptr<DecodeStream>> stream =
        loop.Submit(std::move(states[i]), std::move(logits[i]), options,
                    i == 0 ? gate.Predicate() : nullptr);
    ASSERT_OK(stream);
    streams.push_back(*std::move(stream));
    if (i == 0) gate.WaitUntilHeld();
  }
  gate.Open();
  for (int i = 0; i < kSequences; ++i) {
    std::vector<int32_t> got;
    DecodeEvent event;
    while (streams[i]->Next(&event)) {
      got.insert(got.end(), event.piece.tokens.begin(),
                 event.piece.tokens.end());
    }
    ASSERT_TRUE(event.finished);
    if (i == kForeign || i == kDamaged) {
      EXPECT_FALSE(event.status.ok()) << "sequence " << i;
      EXPECT_LE(got.size(), 1u);  // the prompt's token, sampled before a step
    } else {
      EXPECT_OK(event.status) << "sequence " << i;
      EXPECT_EQ(got, want[i]) << "sequence " << i;
    }
  }
  // The second round's batch of all six (counted when it is stepped,
  // refused or not).
  EXPECT_EQ(loop.stats().max_batch, kSequences);
}

TEST_P(StepBatchTest, CancelledSequenceIsNeverSteppedAgain) {
  GenerateOptions options;
  options.max_tokens = 1000;
  options.stop_at_eos = false;
  DecodeLoop loop(*model_, DecodeLoopOptions{});
  auto state = Prepared(8, 3);
  auto logits = model_->Prefill(RandomTokens(2, kStepBatchVocab - 1, 4), *state,
                                PrefillMode::kCausal);
  ASSERT_OK(logits);
  // The predicate is polled once before each token: it turns true after
  // the fifth token has been sampled.
  std::atomic<int> polls{0};
  auto stream = loop.Submit(std::move(state), *logits, options,
                            [&] { return polls.fetch_add(1) >= 5; });
  ASSERT_OK(stream);
  int tokens = 0;
  DecodeEvent event;
  while ((*stream)->Next(&event)) tokens += event.piece.tokens.size();
  EXPECT_EQ(tokens, 5);
  EXPECT_EQ(event.result.finish_reason, "cancelled");
  EXPECT_EQ(loop.stats().sequences_cancelled, 1);
  EXPECT_EQ(loop.stats().tokens_decoded, 5);
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, StepBatchTest,
    ::testing::Values("based", "jrt", "mamba2", "rat", "llama", "nemotron_h",
                      "granite_moe", "mamba2-resident", "based-resident",
                      "jrt-resident", "llama-resident", "nemotron_h-resident",
                      "rat-resident", "granite_moe-resident"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

}  // namespace
}  // namespace twice::engine
