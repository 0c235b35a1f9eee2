// The orchestrator's equivalences and the decode service's batching, end to
// end (twice-server as a separate process on 127.0.0.1:0, real RocksDB,
// random-weight models), with the engine loaded in the test as the oracle:
//   - segmented ingest leaves the same final state (float tolerance) and
//     gives the same greedy answers as a one-shot ingest, for every
//     architecture (based, jrt, mamba2, rat, llama);
//   - read_twice from the cached first read gives the logits and greedy
//     tokens of reading the same token sequence from scratch, and its usage
//     shows the document prefilled once per question;
//   - concurrent questions (separate Asks, or one BatchAsk) give the answers
//     they give one at a time, while the decode loop steps them together
//     and loads their document state once;
//   - cancelling an Ask stops its decoding: the decode loop's counters stop.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layers/linear_attention_state.h"
#include "engine/layers/short_conv_state.h"
#include "engine/layers/window_kv_state.h"
#include "engine/models/model.h"
#include "gtest/gtest.h"
#include "services/common/state_io.h"
#include "services/store/remote_state_store.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowClient;

constexpr char kDocument[] =
    "The harbour town of Kelloway sits at the mouth of a cold green river. "
    "Its lighthouse stands on the northern breakwater, a white tower with a "
    "red lamp room. The keeper of the lighthouse is Marta Vell, who climbs "
    "the one hundred and twelve steps every evening to light the lamp.";
constexpr char kQuestion[] = "Who keeps the lighthouse?";
// Every architecture the engine serves.
constexpr const char* kArchitectures[] = {"based", "jrt",   "mamba2",
                                          "rat",   "llama", "nemotron_h"};

std::vector<int32_t> Tokens(int n, uint64_t seed) {
  std::vector<int32_t> out(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<int32_t>((s >> 33) % 50000);
  }
  return out;
}

double MaxError(absl::Span<const float> got, absl::Span<const float> want) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - want[i]) -
                                1e-4 * std::abs(double{want[i]}));
  }
  return worst;
}

// Every float of a Based / JRT state, layer by layer.
std::vector<float> StateFloats(engine::SequenceState& state) {
  std::vector<float> out;
  for (int l = 0; l < state.num_layers(); ++l) {
    engine::LayerState& layer = state.layer(l);
    if (auto* la = dynamic_cast<engine::LinearAttentionState*>(&layer)) {
      out.insert(out.end(), la->kv().begin(), la->kv().end());
      out.insert(out.end(), la->k_sum().begin(), la->k_sum().end());
    } else if (auto* conv = dynamic_cast<engine::ShortConvState*>(&layer)) {
      out.insert(out.end(), conv->tail().begin(), conv->tail().end());
    } else if (auto* ring = dynamic_cast<engine::WindowKvState*>(&layer)) {
      const int64_t width = ring->heads() * ring->head_dim();
      for (int64_t slot = 0; slot < ring->capacity(); ++slot) {
        out.insert(out.end(), ring->key(slot), ring->key(slot) + width);
        out.insert(out.end(), ring->value(slot), ring->value(slot) + width);
      }
    }
  }
  return out;
}

class BatchingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    for (const char* arch : kArchitectures) {
      const testing::CommandResult made = RunCommand(
          {CliBinary(), "init-model", std::string("--arch=") + arch,
           "--preset=tiny", "--out=" + models_->path() + "/" + arch, "--json"});
      ASSERT_EQ(made.exit_code, 0) << made.out;
    }
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }

  static std::string ModelDir(const std::string& arch) {
    return models_->path() + "/" + arch;
  }

  // Serves the models of `archs` under their architecture's name.
  void StartServer(const std::vector<std::string>& archs = {"based"}) {
    server_ = std::make_unique<ServerProcess>();
    std::string models = "--model=";
    for (const std::string& arch : archs) {
      absl::StrAppend(&models, models.size() > 8 ? "," : "", arch, "=",
                      ModelDir(arch));
    }
    ASSERT_TRUE(server_->Start({models, "--data-dir=" + data_.path() + "/store",
                                "--internal-listen=127.0.0.1:0"},
                               data_.path() + "/server.log"))
        << server_->stderr_text();
    client_ = std::make_unique<WorkflowClient>(server_->address(),
                                               server_->internal_address());
    store_ = std::make_unique<services::RemoteStateStore>(
        client_->internal_channel(), std::chrono::seconds(30));
  }

  std::unique_ptr<engine::Model> LoadModel(const std::string& arch) {
    auto model = engine::LoadModel(ModelDir(arch));
    EXPECT_OK(model);
    return model.ok() ? *std::move(model) : nullptr;
  }

  // The stored state at the end of a document, decoded.
  std::unique_ptr<engine::SequenceState> FinalState(
      const engine::Model& model, const v1::DocumentInfo& info) {
    auto key = storage::StateKey::FromBytes(
        info.segments(info.segments_size() - 1).state_key().digest());
    EXPECT_OK(key);
    auto state = services::LoadState(*store_, model, *key);
    EXPECT_OK(state);
    return state.ok() ? *std::move(state) : nullptr;
  }

  std::vector<int32_t> Encode(const engine::Model& model,
                              const std::string& text) {
    auto ids = model.tokenizer().Encode(text);
    EXPECT_OK(ids);
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }

  static TempDir* models_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<WorkflowClient> client_;
  std::unique_ptr<services::RemoteStateStore> store_;
};

TempDir* BatchingTest::models_ = nullptr;

TEST_F(BatchingTest, SegmentedIngestEqualsOneShotForEveryArchitecture) {
  StartServer(std::vector<std::string>(std::begin(kArchitectures),
                                       std::end(kArchitectures)));
  for (const std::string arch : kArchitectures) {
    SCOPED_TRACE(arch);
    std::unique_ptr<engine::Model> model = LoadModel(arch);
    ASSERT_NE(model, nullptr);
    const std::vector<int32_t> doc = Tokens(300, 7);
    const auto segmented = client_->Ingest(doc, 16, "seg-" + arch, arch);
    const auto one_shot = client_->Ingest(doc, 0, "one-" + arch, arch);
    ASSERT_OK(segmented.status);
    ASSERT_OK(one_shot.status);
    ASSERT_EQ(segmented.done.done().segments_size(), 19);
    ASSERT_EQ(one_shot.done.done().segments_size(), 1);

    auto a = FinalState(*model, segmented.done.done());
    auto b = FinalState(*model, one_shot.done.done());
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->token_count(), b->token_count());
    // The layer states themselves where the test knows their layout (Based
    // and JRT layers)...
    const std::vector<float> fa = StateFloats(*a), fb = StateFloats(*b);
    ASSERT_EQ(fa.size(), fb.size());
    EXPECT_LE(MaxError(fa, fb), 1e-4);
    // ... and for every architecture, what the states do next.
    const std::vector<int32_t> more = Tokens(20, 8);
    auto la = model->Prefill(more, *a, engine::PrefillMode::kCausal);
    auto lb = model->Prefill(more, *b, engine::PrefillMode::kCausal);
    ASSERT_OK(la);
    ASSERT_OK(lb);
    EXPECT_LE(MaxError(*la, *lb), 1e-4);

    for (v1::AskMode mode : {v1::ASK_MODE_DEFAULT, v1::ASK_MODE_READ_TWICE}) {
      const auto x = client_->Ask("seg-" + arch, kQuestion, mode, 12);
      const auto y = client_->Ask("one-" + arch, kQuestion, mode, 12);
      ASSERT_OK(x.status);
      ASSERT_OK(y.status);
      EXPECT_EQ(x.tokens, y.tokens) << "mode " << mode;
    }
  }
  // JRT: the prefix encoding of a document prefix (as_of_tokens), and of a
  // document grown by Append (re-encoded on the next prefix question), are
  // those of the same tokens ingested whole.
  const std::vector<int32_t> doc = Tokens(300, 7);
  const std::vector<int32_t> head(doc.begin(), doc.begin() + 150);
  ASSERT_OK(client_->Ingest(head, 16, "head-jrt", "jrt").status);
  const auto as_of =
      client_->Ask("seg-jrt", kQuestion, v1::ASK_MODE_PREFIX, 12, 150);
  ASSERT_OK(as_of.status);
  EXPECT_EQ(
      as_of.tokens,
      client_->Ask("head-jrt", kQuestion, v1::ASK_MODE_PREFIX, 12).tokens);
  ASSERT_TRUE(client_
                  ->Append("head-jrt",
                           std::vector<int32_t>(doc.begin() + 150, doc.end()),
                           16)
                  .status.ok());
  const auto grown =
      client_->Ask("head-jrt", kQuestion, v1::ASK_MODE_PREFIX, 12);
  ASSERT_OK(grown.status);
  EXPECT_EQ(grown.tokens,
            client_->Ask("one-jrt", kQuestion, v1::ASK_MODE_PREFIX, 12).tokens);
  EXPECT_EQ(client_->Ask("head-jrt", kQuestion, v1::ASK_MODE_PREFIX, 12)
                .usage.states_reused(),
            1);
}

TEST_F(BatchingTest, ReadTwiceFromTheCachedFirstReadEqualsReadingFromScratch) {
  StartServer();
  std::unique_ptr<engine::Model> model = LoadModel("based");
  ASSERT_NE(model, nullptr);
  const auto ingested = client_->Ingest({}, 32, "doc", "based", kDocument);
  ASSERT_OK(ingested.status);
  const v1::DocumentInfo& info = ingested.done.done();
  const std::vector<int32_t> doc = Encode(*model, kDocument);
  const std::vector<int32_t> preamble =
      Encode(*model, std::string("\n\nQuestion: ") + kQuestion + "\n\n");
  const std::vector<int32_t> prompt =
      Encode(*model, std::string("\n\nQuestion: ") + kQuestion + "\nAnswer:");
  ASSERT_EQ(static_cast<int64_t>(doc.size()), info.tokens());

  // Logits: the stored first read + (preamble, document, prompt) against
  // the whole sequence read from the empty state.
  std::vector<int32_t> tail = preamble;
  tail.insert(tail.end(), doc.begin(), doc.end());
  tail.insert(tail.end(), prompt.begin(), prompt.end());
  std::unique_ptr<engine::SequenceState> cached = FinalState(*model, info);
  ASSERT_NE(cached, nullptr);
  auto resumed = model->Prefill(tail, *cached, engine::PrefillMode::kCausal);
  std::vector<int32_t> whole = doc;
  whole.insert(whole.end(), tail.begin(), tail.end());
  auto fresh = model->NewState();
  auto scratch = model->Prefill(whole, *fresh, engine::PrefillMode::kCausal);
  ASSERT_OK(resumed);
  ASSERT_OK(scratch);
  EXPECT_LE(MaxError(*resumed, *scratch), 2e-5);

  // Greedy tokens: read_twice against a document that IS that sequence.
  std::vector<int32_t> twice_read = doc;
  twice_read.insert(twice_read.end(), preamble.begin(), preamble.end());
  twice_read.insert(twice_read.end(), doc.begin(), doc.end());
  ASSERT_OK(client_->Ingest(twice_read, 0, "scratch", "based").status);
  const auto read_twice =
      client_->Ask("doc", kQuestion, v1::ASK_MODE_READ_TWICE, 16);
  const auto from_scratch =
      client_->Ask("scratch", kQuestion, v1::ASK_MODE_DEFAULT, 16);
  ASSERT_OK(read_twice.status);
  ASSERT_OK(from_scratch.status);
  EXPECT_EQ(read_twice.tokens, from_scratch.tokens);
  // The document was prefilled once for this question (the second read),
  // the first read came from the store.
  EXPECT_EQ(read_twice.usage.tokens_prefilled(),
            static_cast<int64_t>(tail.size()));
  EXPECT_EQ(read_twice.usage.states_reused(), 1);
  EXPECT_EQ(read_twice.usage.tokens_reused(), info.tokens());
}

TEST_F(BatchingTest, ConcurrentQuestionsShareDecodeStepsAndAnswerAsAlone) {
  StartServer();
  ASSERT_OK(client_->Ingest({}, 32, "doc", "based", kDocument).status);
  const std::vector<std::string> questions = {
      "Who keeps the lighthouse?", "Where is the town?",
      "What colour is the lamp?",  "How many steps are there?",
      "When is the lamp lit?",     "What is the river like?"};
  constexpr int kMaxTokens = 40;
  std::vector<std::vector<int32_t>> alone;
  for (const std::string& q : questions) {
    const auto answer =
        client_->Ask("doc", q, v1::ASK_MODE_DEFAULT, kMaxTokens);
    ASSERT_OK(answer.status);
    alone.push_back(answer.tokens);
  }
  const v1::DecodeStats before = client_->DecodeStats();

  std::vector<std::vector<int32_t>> together(questions.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < questions.size(); ++i) {
    threads.emplace_back([&, i] {
      together[i] =
          client_->Ask("doc", questions[i], v1::ASK_MODE_DEFAULT, kMaxTokens)
              .tokens;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(together, alone);

  v1::BatchAskRequest batch;
  batch.set_document_id("doc");
  for (const std::string& q : questions) {
    v1::BatchQuestion* question = batch.add_questions();
    question->set_question(q);
    question->mutable_sampling()->set_max_tokens(kMaxTokens);
    question->mutable_sampling()->set_ignore_eos(true);
  }
  grpc::ClientContext context;
  auto reader = client_->orchestrator().BatchAsk(&context, batch);
  std::vector<std::vector<int32_t>> batched(questions.size());
  std::vector<v1::Usage> usage(questions.size());
  v1::BatchAskResponse response;
  while (reader->Read(&response)) {
    auto& out = batched[response.index()];
    out.insert(out.end(), response.response().tokens().begin(),
               response.response().tokens().end());
    if (response.response().finished()) {
      usage[response.index()] = response.response().usage();
    }
  }
  ASSERT_OK(reader->Finish());
  EXPECT_EQ(batched, alone);
  for (const v1::Usage& u : usage) EXPECT_EQ(u.states_reused(), 1);

  const v1::DecodeStats after = client_->DecodeStats();
  EXPECT_EQ(after.tokens_decoded() - before.tokens_decoded(),
            2 * kMaxTokens * static_cast<int64_t>(questions.size()));
  // Concurrent sequences were read in shared steps: fewer steps than
  // tokens, and at least one step carried several sequences.
  EXPECT_GE(after.max_batch(), 2);
  EXPECT_LT(after.steps() - before.steps(),
            after.tokens_decoded() - before.tokens_decoded());
  // The document state was decoded from the store once, then shared.
  EXPECT_EQ(after.state_cache_misses(), 1);
  EXPECT_GE(after.state_cache_hits(), 2 * questions.size() - 1);
}

TEST_F(BatchingTest, CancellingAnAskStopsItsDecoding) {
  StartServer();
  ASSERT_OK(client_->Ingest({}, 32, "doc", "based", kDocument).status);
  const v1::DecodeStats before = client_->DecodeStats();
  {
    grpc::ClientContext context;
    auto reader = client_->orchestrator().Ask(
        &context,
        WorkflowClient::Question("doc", kQuestion, v1::ASK_MODE_DEFAULT, 4000));
    v1::AskResponse first;
    ASSERT_TRUE(reader->Read(&first));
    ASSERT_EQ(first.tokens_size(), 1);
    context.TryCancel();
    while (reader->Read(&first)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The loop notices before the sequence's next token; wait until it has.
  v1::DecodeStats stopped;
  for (int i = 0; i < 1000; ++i) {
    stopped = client_->DecodeStats();
    if (stopped.active_sequences() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(stopped.active_sequences(), 0);
  EXPECT_EQ(stopped.sequences_cancelled() - before.sequences_cancelled(), 1);
  // Far fewer than the 4000 asked for: decoding stopped at the cancel (the
  // tokens counted are those decoded while the cancel travelled from this
  // client through the orchestrator to the decode loop: a tiny model's
  // step takes well under a millisecond, so a loaded machine's thread
  // hand-offs leave room for a few hundred).
  const int64_t decoded = stopped.tokens_decoded() - before.tokens_decoded();
  EXPECT_GE(decoded, 1);
  EXPECT_LT(decoded, 1000);
  // And nothing more afterwards.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(client_->DecodeStats().tokens_decoded(), stopped.tokens_decoded());
}

}  // namespace
}  // namespace twice
