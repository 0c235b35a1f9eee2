// Tenants and bearer tokens against a real twice-server (role all) started
// with --auth-tokens-file: two tenants call every public RPC, each attempt
// to reach the other's document answers NOT_FOUND with the message of a
// missing id, missing or wrong tokens answer UNAUTHENTICATED, the public
// listener refuses every internal RPC whatever the token, tenant tokens
// cannot call the admin RPCs, and the token file is re-read when it
// changes, failing closed when it is deleted, emptied or broken.
#include "services/common/auth.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/decode.grpc.pb.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"
#include "twice/v1/store.grpc.pb.h"

namespace twice::services {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-abcdefghijkl";
constexpr char kOps[] = "ops-admin-token-zyxwvu";
constexpr char kCarol[] = "carol-token-9876543210";
constexpr char kDocument[] =
    "Twice keeps the state of a document so that every question costs only "
    "the question. The cat sat on the mat while the dog slept by the door. ";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::unique_ptr<grpc::ClientContext> Call(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(120));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

struct Ingested {
  grpc::Status status;
  v1::IngestResponse last;
};

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=based", "--preset=tiny",
                    "--out=" + dir_.path() + "/model", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
    tokens_file_ = dir_.path() + "/tokens";
    WriteFile(tokens_file_, std::string("# test tenants\n") + kAlice +
                                " alice\n" + kBob + " bob   # second\n\n" +
                                kOps + " ops admin\n");
    ASSERT_TRUE(server_.Start({"--model=" + dir_.path() + "/model",
                               "--data-dir=" + dir_.path() + "/data",
                               "--auth-tokens-file=" + tokens_file_},
                              dir_.path() + "/server.log"))
        << server_.stderr_text();
    channel_ = grpc::CreateChannel(server_.address(),
                                   grpc::InsecureChannelCredentials());
    orchestrator_ = v1::Orchestrator::NewStub(channel_);
  }

  Ingested Ingest(const std::string& token, const std::string& id = "") {
    auto context = Call(token);
    auto stream = orchestrator_->Ingest(context.get());
    v1::IngestRequest request;
    request.mutable_header()->set_document_id(id);
    request.set_text(kDocument);
    stream->Write(request);
    stream->WritesDone();
    Ingested result;
    v1::IngestResponse response;
    while (stream->Read(&response)) result.last = response;
    result.status = stream->Finish();
    return result;
  }

  grpc::Status Append(const std::string& token, const std::string& id) {
    auto context = Call(token);
    auto stream = orchestrator_->Append(context.get());
    v1::AppendRequest request;
    request.set_document_id(id);
    request.set_text(" And then it rained.");
    stream->Write(request);
    stream->WritesDone();
    v1::IngestResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  }

  grpc::Status Ask(const std::string& token, const std::string& id,
                   std::string* text = nullptr) {
    auto context = Call(token);
    v1::AskRequest request;
    request.set_document_id(id);
    request.set_question("Where did the cat sit?");
    request.mutable_sampling()->set_max_tokens(4);
    auto reader = orchestrator_->Ask(context.get(), request);
    v1::AskResponse response;
    while (reader->Read(&response)) {
      if (text != nullptr) *text += response.text();
    }
    return reader->Finish();
  }

  grpc::Status BatchAsk(const std::string& token, const std::string& id) {
    auto context = Call(token);
    v1::BatchAskRequest request;
    request.set_document_id(id);
    v1::BatchQuestion* q = request.add_questions();
    q->set_question("Who slept?");
    q->mutable_sampling()->set_max_tokens(2);
    auto reader = orchestrator_->BatchAsk(context.get(), request);
    v1::BatchAskResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }

  grpc::Status Get(const std::string& token, const std::string& id) {
    v1::GetDocumentRequest request;
    request.set_document_id(id);
    v1::DocumentInfo info;
    return orchestrator_->GetDocument(Call(token).get(), request, &info);
  }

  grpc::Status Pin(const std::string& token, const std::string& id) {
    v1::PinDocumentRequest request;
    request.set_document_id(id);
    request.set_pinned(true);
    v1::DocumentInfo info;
    return orchestrator_->PinDocument(Call(token).get(), request, &info);
  }

  grpc::Status Delete(const std::string& token, const std::string& id) {
    v1::DeleteDocumentRequest request;
    request.set_document_id(id);
    v1::DeleteDocumentResponse response;
    return orchestrator_->DeleteDocument(Call(token).get(), request, &response);
  }

  grpc::Status List(const std::string& token, std::vector<std::string>* ids) {
    v1::ListDocumentsRequest request;
    v1::ListDocumentsResponse response;
    grpc::Status status =
        orchestrator_->ListDocuments(Call(token).get(), request, &response);
    if (ids != nullptr) {
      ids->clear();
      for (const v1::DocumentInfo& d : response.documents()) {
        ids->push_back(d.document_id());
      }
    }
    return status;
  }

  grpc::Status Models(const std::string& token) {
    v1::ListModelsRequest request;
    v1::ListModelsResponse response;
    return orchestrator_->ListModels(Call(token).get(), request, &response);
  }

  // Every public RPC but Ingest, on document `id`, with `token`.
  std::vector<std::pair<std::string, grpc::Status>> EveryDocumentRpc(
      const std::string& token, const std::string& id) {
    return {{"GetDocument", Get(token, id)},
            {"Ask", Ask(token, id)},
            {"BatchAsk", BatchAsk(token, id)},
            {"Append", Append(token, id)},
            {"PinDocument", Pin(token, id)},
            {"DeleteDocument", Delete(token, id)}};
  }

  TempDir dir_;
  std::string tokens_file_;
  ServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Orchestrator::Stub> orchestrator_;
};

TEST_F(AuthTest, TenantsSeeOnlyTheirOwnDocuments) {
  const Ingested alice = Ingest(kAlice);
  ASSERT_OK(alice.status);
  const std::string id = alice.last.document_id();
  ASSERT_FALSE(id.empty());
  std::string answer;
  ASSERT_OK(Ask(kAlice, id, &answer));
  ASSERT_OK(BatchAsk(kAlice, id));
  ASSERT_OK(Get(kAlice, id));

  // The message bob gets for alice's id is exactly that of an id nobody
  // has: no existence oracle.
  const std::string missing = "doc-000000000000000000000000";
  ASSERT_EQ(Get(kAlice, missing).error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string missing_message = Get(kAlice, missing).error_message();
  const std::string expected =
      std::string(missing_message)
          .replace(missing_message.find(missing), missing.size(), id);
  for (const auto& [rpc, status] : EveryDocumentRpc(kBob, id)) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << rpc;
    EXPECT_EQ(status.error_message(), expected) << rpc;
  }
  std::vector<std::string> ids;
  ASSERT_OK(List(kBob, &ids));
  EXPECT_TRUE(ids.empty());
  ASSERT_OK(List(kAlice, &ids));
  EXPECT_EQ(ids, std::vector<std::string>{id});

  // Bob may reuse alice's id for his own document: not ALREADY_EXISTS, and
  // none of alice's states is reused for it (the tenant roots every key).
  const Ingested bob = Ingest(kBob, id);
  ASSERT_OK(bob.status);
  EXPECT_EQ(bob.last.document_id(), id);
  EXPECT_EQ(bob.last.segments_reused(), 0);
  EXPECT_GT(bob.last.tokens_total(), 0);
  // A repeated ingest inside one tenant does reuse (so the check above can
  // fail).
  const Ingested again = Ingest(kAlice, "alice-second");
  ASSERT_OK(again.status);
  EXPECT_GT(again.last.segments_reused(), 0);

  // Bob's delete removes only his document.
  ASSERT_OK(Delete(kBob, id));
  EXPECT_OK(Get(kAlice, id));
  EXPECT_EQ(Get(kBob, id).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_OK(Append(kAlice, id));
  ASSERT_OK(Pin(kAlice, id));
  ASSERT_OK(Models(kBob));
  ASSERT_OK(Delete(kAlice, id));
}

TEST_F(AuthTest, MissingOrWrongTokenIsUnauthenticated) {
  const Ingested alice = Ingest(kAlice);
  ASSERT_OK(alice.status);
  const std::string id = alice.last.document_id();
  for (const std::string& token :
       {std::string(), std::string("not-a-known-token-123"),
        std::string(kAlice) + "x", std::string(kAlice).substr(0, 20)}) {
    EXPECT_EQ(Ingest(token).status.error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    for (const auto& [rpc, status] : EveryDocumentRpc(token, id)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << rpc;
    }
    EXPECT_EQ(List(token, nullptr).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Models(token).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // A scheme other than Bearer is no token.
  v1::ListModelsRequest request;
  v1::ListModelsResponse response;
  grpc::ClientContext basic;
  basic.AddMetadata("authorization", std::string("Basic ") + kAlice);
  EXPECT_EQ(orchestrator_->ListModels(&basic, request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The document is still there for its owner.
  EXPECT_OK(Get(kAlice, id));
}

TEST_F(AuthTest, TenantTokensCannotCallInternalOrAdminRpcs) {
  const Ingested alice = Ingest(kAlice);
  ASSERT_OK(alice.status);
  auto store = v1::Store::NewStub(channel_);
  auto decode = v1::Decode::NewStub(channel_);
  auto prefill = v1::Prefill::NewStub(channel_);
  for (const std::string& token : {std::string(), std::string(kBob),
                                   std::string(kAlice), std::string(kOps)}) {
    // Internal RPCs trust the tenant in the request: role all does not
    // serve them on its public listener at all, whoever asks.
    v1::GetDocumentRecordRequest get;
    get.set_tenant("alice");
    get.set_document_id(alice.last.document_id());
    v1::DocumentRecord record;
    EXPECT_EQ(store->GetDocument(Call(token).get(), get, &record).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::ListDocumentRecordsRequest list;
    list.set_tenant("alice");
    v1::ListDocumentRecordsResponse listed;
    EXPECT_EQ(
        store->ListDocuments(Call(token).get(), list, &listed).error_code(),
        grpc::StatusCode::PERMISSION_DENIED);
    v1::StatStateRequest stat;
    v1::StatStateResponse stat_response;
    EXPECT_EQ(
        store->StatState(Call(token).get(), stat, &stat_response).error_code(),
        grpc::StatusCode::PERMISSION_DENIED);
    v1::DecodeStatsRequest stats_request;
    v1::DecodeStats stats;
    EXPECT_EQ(
        decode->Stats(Call(token).get(), stats_request, &stats).error_code(),
        grpc::StatusCode::PERMISSION_DENIED);
    v1::GenerateRequest generate;
    generate.set_tenant("alice");
    {
      auto context = Call(token);
      auto reader = decode->Generate(context.get(), generate);
      v1::GenerateResponse response;
      while (reader->Read(&response)) {
      }
      EXPECT_EQ(reader->Finish().error_code(),
                grpc::StatusCode::PERMISSION_DENIED);
    }
    {
      auto context = Call(token);
      auto stream = prefill->Prefill(context.get());
      stream->WritesDone();
      v1::PrefillResponse response;
      while (stream->Read(&response)) {
      }
      EXPECT_EQ(stream->Finish().error_code(),
                grpc::StatusCode::PERMISSION_DENIED);
    }
  }

  // Admin RPCs: PERMISSION_DENIED for a tenant token, UNAUTHENTICATED
  // without a valid one, OK for an admin token.
  auto admin_calls = [&](const std::string& token) {
    std::vector<std::pair<std::string, grpc::StatusCode>> codes;
    v1::StoreStatsRequest stats_request;
    v1::StoreStats stats;
    codes.push_back(
        {"Stats",
         store->Stats(Call(token).get(), stats_request, &stats).error_code()});
    v1::VerifyStoreRequest verify_request;
    v1::VerifyStoreResponse verify;
    codes.push_back(
        {"Verify", store->Verify(Call(token).get(), verify_request, &verify)
                       .error_code()});
    v1::CompactStoreRequest compact_request;
    v1::CompactStoreResponse compact;
    codes.push_back(
        {"Compact", store->Compact(Call(token).get(), compact_request, &compact)
                        .error_code()});
    v1::GcStoreRequest gc_request;
    v1::GcStoreResponse gc;
    codes.push_back(
        {"Gc", store->Gc(Call(token).get(), gc_request, &gc).error_code()});
    v1::BackupStoreRequest backup_request;
    backup_request.set_name("checkpoint-" + std::to_string(codes.size()) +
                            token.substr(0, 3));
    v1::BackupStoreResponse backup;
    codes.push_back(
        {"Backup", store->Backup(Call(token).get(), backup_request, &backup)
                       .error_code()});
    return codes;
  };
  for (const auto& [rpc, code] : admin_calls(kAlice)) {
    EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED) << rpc;
  }
  for (const auto& [rpc, code] : admin_calls("")) {
    EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED) << rpc;
  }
  for (const auto& [rpc, code] : admin_calls("wrong-token-000000000")) {
    EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED) << rpc;
  }
  for (const auto& [rpc, code] : admin_calls(kOps)) {
    EXPECT_EQ(code, grpc::StatusCode::OK) << rpc;
  }
}

TEST_F(AuthTest, TokenFileIsReloadedWhenItChanges) {
  ASSERT_OK(Models(kBob));
  EXPECT_EQ(Models(kCarol).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Bob's token revoked, carol's added.
  WriteFile(tokens_file_, std::string(kAlice) + " alice\n" + kCarol +
                              " carol\n" + kOps + " ops admin\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_OK(Models(kCarol));
  EXPECT_EQ(Models(kBob).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_OK(Models(kAlice));
  // A broken file fails closed: no token stays valid (keeping the old
  // table would keep a token the operator meant to remove).
  WriteFile(tokens_file_, "short alice\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(Models(kCarol).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Models("short").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Fixed again: the tokens it names are back.
  WriteFile(tokens_file_, std::string(kCarol) + " carol\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_OK(Models(kCarol));
  // No token ever appears in the log.
  const std::string log = server_.stderr_text();
  for (const char* token : {kAlice, kBob, kOps, kCarol}) {
    EXPECT_EQ(log.find(token), std::string::npos) << token;
  }
  EXPECT_NE(log.find("auth.tokens_rejected"), std::string::npos);
}

// Deleting or emptying the token file revokes every token; access never
// widens to "authentication off".
TEST_F(AuthTest, DeletingOrEmptyingTheTokenFileRevokesEveryToken) {
  ASSERT_OK(Models(kAlice));
  ASSERT_TRUE(std::filesystem::remove(tokens_file_));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  for (const char* token : {kAlice, kBob, kOps}) {
    EXPECT_EQ(Models(token).error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << token;
  }
  EXPECT_EQ(Models("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Restored: back in force.
  WriteFile(tokens_file_, std::string(kAlice) + " alice\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_OK(Models(kAlice));
  // Emptied: a valid file with no tokens.
  WriteFile(tokens_file_, "# every tenant removed\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(Models(kAlice).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Models("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const std::string log = server_.stderr_text();
  EXPECT_NE(log.find("auth.tokens_rejected"), std::string::npos) << log;
  EXPECT_NE(log.find("valid_tokens=0"), std::string::npos) << log;
}

TEST_F(AuthTest, CliSendsTokenFromFlagOrEnvironment) {
  WriteFile(dir_.path() + "/doc.txt", kDocument);
  const testing::CommandResult denied = RunCommand(
      {CliBinary(), "docs", "--server=" + server_.address(), "--json"});
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_NE(denied.out.find("UNAUTHENTICATED"), std::string::npos)
      << denied.out;
  const testing::CommandResult ingested =
      RunCommand({CliBinary(), "ingest", dir_.path() + "/doc.txt",
                  "--server=" + server_.address(),
                  "--token=" + std::string(kAlice), "--json"});
  ASSERT_EQ(ingested.exit_code, 0) << ingested.out;
  setenv("TWICE_TOKEN", kAlice, 1);
  const testing::CommandResult listed = RunCommand(
      {CliBinary(), "docs", "--server=" + server_.address(), "--json"});
  unsetenv("TWICE_TOKEN");
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_NE(listed.out.find("doc-"), std::string::npos) << listed.out;
  const testing::CommandResult other =
      RunCommand({CliBinary(), "docs", "--server=" + server_.address(),
                  "--token=" + std::string(kBob), "--json"});
  ASSERT_EQ(other.exit_code, 0) << other.out;
  EXPECT_EQ(other.out.find("doc-"), std::string::npos) << other.out;
}

TEST(TokenFileTest, ParsesLinesAndRejectsBadOnes) {
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(
      "# comment\n\n  tok-aaaaaaaaaaaaaaaa  t1 \ntok-bbbbbbbbbbbbbbbb t.2 "
      "admin "
      "# trailing\r\n");
  ASSERT_OK(entries);
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].tenant, "t1");
  EXPECT_FALSE((*entries)[0].admin);
  EXPECT_EQ((*entries)[1].token, "tok-bbbbbbbbbbbbbbbb");
  EXPECT_TRUE((*entries)[1].admin);
  for (const char* bad :
       {"short t\n", "tok-aaaaaaaaaaaaaaaa\n", "tok-aaaaaaaaaaaaaaaa t root\n",
        "tok-aaaaaaaaaaaaaaaa t/x\n",
        "tok-aaaaaaaaaaaaaaaa a\ntok-aaaaaaaaaaaaaaaa b\n"}) {
    absl::StatusOr<std::vector<TokenEntry>> parsed = ParseTokenFile(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    // Errors name the line, never the token.
    EXPECT_EQ(parsed.status().message().find("tok-"), absl::string_view::npos);
  }
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

}  // namespace
}  // namespace twice::services
