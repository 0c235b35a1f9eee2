// End to end: a RAT model's chunk-KV states travel through the store as
// append-only blocks (engine/state/state_blocks.h, StateStore::
// PutStateBlocks). A real twice-server (role all, RocksDB store) serves the
// tiny random RAT model (2 chunk-KV layers, D 64, chunk L 16); the test
// reads the store's counters through the Store service's Stats RPC:
// - an ingest in several segments stores each segment's state as a manifest
//   over blocks (two new blocks per segment: rows + head);
// - each Append of one segment adds about the bytes of its new chunk rows
//   plus a small head and manifest, not the whole (growing) state;
// - answers equal a direct engine computation (the same segment-by-segment
//   prefill, the question prompt, greedy decode) token for token, before
//   and after a server restart, with the stored state reused.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "engine/sampling/sampler.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "services/orchestrator/prompt_templates.h"
#include "tests/services/workflow_client.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice {
namespace {

using testing::ServerProcess;
using testing::TempDir;
using testing::WorkflowClient;

constexpr int64_t kSegment = 64;  // 4 chunks of L 16
constexpr int64_t kChunk = 16;
constexpr int kRatLayers = 2;
constexpr int64_t kRowBytes = 2 * 64 * 4;  // one closed chunk: k̄ | v̄, f32
constexpr int kRatMaxTokens = 8;
constexpr char kRatQuestion[] = "What is the third word?";

std::vector<int32_t> Tokens(int n, uint64_t seed) {
  std::vector<int32_t> out(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<int32_t>((s >> 33) % 50000);
  }
  return out;
}

class RatBlocksPipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    engine::InitModelOptions options;
    options.architecture = "rat";
    options.preset = "tiny";
    options.out_dir = models_->path() + "/rat";
    options.seed = 7;
    const absl::Status written = engine::WriteRandomModel(options);
    ASSERT_OK(written);
    auto model = engine::LoadModel(options.out_dir);
    ASSERT_OK(model);
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete models_;
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->Start({"--model=rat=" + models_->path() + "/rat",
                                "--data-dir=" + data_.path() + "/store"},
                               data_.path() + "/server.log"))
        << server_->stderr_text();
    client_ = std::make_unique<WorkflowClient>(server_->address());
    store_ = v1::Store::NewStub(client_->channel());
  }
  int StopServer() {
    store_.reset();
    client_.reset();
    return server_->Stop();
  }

  v1::StoreStats Stats() {
    grpc::ClientContext context;
    context.set_deadline(WorkflowClient::Deadline(30));
    v1::StoreStats stats;
    const grpc::Status status =
        store_->Stats(&context, v1::StoreStatsRequest(), &stats);
    EXPECT_OK(status);
    return stats;
  }

  // The engine's own answer: `tokens` prefilled in segments of kSegment
  // (as the server does), the question prompt, then greedy decoding with
  // the decode loop's StepBatch. Also returns the whole state's codec size.
  static std::vector<int32_t> EngineAnswer(const std::vector<int32_t>& tokens,
                                           int64_t* whole_state_bytes) {
    auto state = model_->NewState();
    for (size_t i = 0; i < tokens.size(); i += kSegment) {
      const size_t n = std::min<size_t>(kSegment, tokens.size() - i);
      EXPECT_TRUE(model_
                      ->Prefill(absl::MakeConstSpan(tokens).subspan(i, n),
                                *state, engine::PrefillMode::kCausal)
                      .ok());
    }
    if (whole_state_bytes != nullptr) {
      *whole_state_bytes =
          static_cast<int64_t>(engine::EncodeState(*state).size());
    }
    auto prompt = model_->tokenizer().Encode(services::FillTemplate(
        services::PromptTemplates().question_prompt, kRatQuestion));
    EXPECT_OK(prompt);
    auto logits =
        model_->Prefill(*prompt, *state, engine::PrefillMode::kCausal);
    EXPECT_OK(logits);
    engine::Sampler sampler{engine::SamplingParams{}};
    const int32_t vocab = model_->description().vocab_size;
    std::vector<int32_t> answer;
    while (logits.ok()) {
      absl::StatusOr<int32_t> token = sampler.Sample(*logits, vocab);
      EXPECT_OK(token);
      if (!token.ok()) break;
      answer.push_back(*token);
      if (answer.size() == static_cast<size_t>(kRatMaxTokens)) break;
      engine::SequenceState* states[] = {state.get()};
      logits = model_->StepBatch({answer.back()}, states);
    }
    return answer;
  }

  static TempDir* models_;
  static engine::Model* model_;
  TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<WorkflowClient> client_;
  std::unique_ptr<v1::Store::Stub> store_;
};

TempDir* RatBlocksPipelineTest::models_ = nullptr;
engine::Model* RatBlocksPipelineTest::model_ = nullptr;

TEST_F(RatBlocksPipelineTest, SegmentsAndAppendsWriteOnlyNewBlocks) {
  StartServer();
  const v1::StoreStats empty = Stats();
  EXPECT_EQ(empty.block_count(), 0);

  // One ingest of 5 segments: every segment's state is a manifest over the
  // blocks of the previous one plus its own rows and head.
  const std::vector<int32_t> doc = Tokens(5 * kSegment, 1);
  const auto ingested = client_->Ingest(doc, kSegment, "segmented", "rat");
  ASSERT_OK(ingested.status);
  const v1::StoreStats after_ingest = Stats();
  EXPECT_EQ(after_ingest.block_count() - empty.block_count(), 2 * 5);
  EXPECT_EQ(after_ingest.state_count() - empty.state_count(), 5);
  int64_t whole_sum = 0;  // what five whole states would take
  for (int k = 1; k <= 5; ++k) {
    int64_t whole = 0;
    EngineAnswer(std::vector<int32_t>(doc.begin(), doc.begin() + k * kSegment),
                 &whole);
    whole_sum += whole;
  }
  const int64_t ingest_bytes = after_ingest.state_bytes() - empty.state_bytes();
  std::printf("5-segment ingest: %lld bytes stored (whole states: %lld)\n",
              static_cast<long long>(ingest_bytes),
              static_cast<long long>(whole_sum));
  EXPECT_LT(ingest_bytes * 2, whole_sum);

  // Appends, one segment each: the bytes each adds are its new rows plus
  // a head and a manifest, whatever the document's length.
  const std::vector<int32_t> first = Tokens(kSegment, 2);
  ASSERT_OK(client_->Ingest(first, kSegment, "grown", "rat").status);
  std::vector<int32_t> grown = first;
  v1::StoreStats before = Stats();
  const int64_t new_rows_bytes = kRatLayers * (kSegment / kChunk) * kRowBytes;
  for (int k = 1; k <= 6; ++k) {
    SCOPED_TRACE(k);
    const std::vector<int32_t> more = Tokens(kSegment, 10 + k);
    const auto appended = client_->Append("grown", more, kSegment);
    ASSERT_OK(appended.status);
    grown.insert(grown.end(), more.begin(), more.end());
    const v1::StoreStats after = Stats();
    const int64_t added = after.state_bytes() - before.state_bytes();
    int64_t whole = 0;
    EngineAnswer(grown, &whole);
    std::printf(
        "append %d (%zu tokens): +%lld bytes stored, whole state %lld\n", k,
        grown.size(), static_cast<long long>(added),
        static_cast<long long>(whole));
    EXPECT_EQ(after.block_count() - before.block_count(), 2);
    EXPECT_EQ(after.state_count() - before.state_count(), 1);
    // New rows, plus the head (2 layers × (count + open chunk) ≈ 1.2 KB),
    // the manifest (48 bytes per listed block) and envelopes.
    EXPECT_GE(added, new_rows_bytes);
    EXPECT_LE(added, new_rows_bytes + 2048 + 48 * (2 * (k + 1)));
    if (k >= 3) {
      EXPECT_LT(added * 2, whole);
    }
    before = after;
  }

  // Answers equal the engine's, now and after a restart (from the stored
  // blocks: reused, nothing recomputed).
  const std::vector<int32_t> want_segmented = EngineAnswer(doc, nullptr);
  const std::vector<int32_t> want_grown = EngineAnswer(grown, nullptr);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before restart" : "after restart");
    for (const auto& [id, want, tokens] :
         {std::tuple{"segmented", want_segmented, doc.size()},
          std::tuple{"grown", want_grown, grown.size()}}) {
      SCOPED_TRACE(id);
      const auto answer =
          client_->Ask(id, kRatQuestion, v1::ASK_MODE_DEFAULT, kRatMaxTokens);
      ASSERT_OK(answer.status);
      EXPECT_EQ(answer.tokens, want);
      EXPECT_EQ(answer.usage.states_reused(), 1);
      EXPECT_EQ(answer.usage.states_recomputed(), 0);
      EXPECT_EQ(answer.usage.tokens_reused(), static_cast<int64_t>(tokens));
    }
    if (round == 0) {
      ASSERT_EQ(StopServer(), 0);
      StartServer();
      // The blocks survived the restart.
      EXPECT_EQ(Stats().block_count(), before.block_count());
    }
  }
  const v1::StoreStats last = Stats();
  EXPECT_EQ(last.corruptions(), 0);
  EXPECT_EQ(StopServer(), 0);
}

}  // namespace
}  // namespace twice
