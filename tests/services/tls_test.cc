// TLS and mTLS on real twice-server processes, with throwaway certificates
// made by the `openssl` command at test time: a CA, a server certificate
// for 127.0.0.1, one certificate per Twice role naming it by a SPIFFE-style
// URI (spiffe://twice/role/NAME), a public client certificate signed by the
// same CA, and a second, unrelated CA with its own client certificate for
// the failure cases. Holding a certificate of the CA makes no caller
// internal: only the internal token or a role's name does.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/services/internal_rpc_probe.h"
#include "tests/testing/grpc_status_matchers.h"
#include "tests/testing/server_process.h"
#include "twice/v1/orchestrator.grpc.pb.h"
#include "twice/v1/prefill.grpc.pb.h"

namespace twice::services {
namespace {

using testing::CliBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

constexpr char kAlice[] = "alice-token-0123456789";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

bool Shell(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

std::string RoleUri(const std::string& role) {
  return "spiffe://twice/role/" + role;
}

// Every role trusts these three as internal peers.
std::string InternalPeerNames() {
  return "--internal-peer-names=" + RoleUri("orchestrator") + "," +
         RoleUri("prefill") + "," + RoleUri("decode");
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string d = dir_->path();
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
    WriteFile(d + "/server.ext", "subjectAltName=IP:127.0.0.1\n");
    WriteFile(d + "/client.ext", "extendedKeyUsage=clientAuth\n");
    for (const std::string ca : {"ca", "other-ca"}) {
      ASSERT_TRUE(Shell("openssl req -x509 -nodes -days 2" + ec + " -keyout " +
                        d + "/" + ca + ".key -out " + d + "/" + ca +
                        ".pem -subj /CN=twice-test-" + ca));
    }
    // server (CA), client (CA), stranger (other CA), and a certificate per
    // role (CA) that serves as its server and its client certificate.
    std::vector<std::vector<std::string>> certs = {
        {"server", "ca", "server.ext"},
        {"client", "ca", "client.ext"},
        {"stranger", "other-ca", "client.ext"}};
    for (const char* role : {"orchestrator", "prefill", "decode", "store"}) {
      WriteFile(d + "/" + role + ".ext",
                std::string("subjectAltName=IP:127.0.0.1,URI:") +
                    RoleUri(role) + "\n");
      certs.push_back({role, "ca", std::string(role) + ".ext"});
    }
    for (const auto& c : certs) {
      ASSERT_TRUE(Shell("openssl req -nodes" + ec + " -keyout " + d + "/" +
                        c[0] + ".key -out " + d + "/" + c[0] +
                        ".csr -subj /CN=127.0.0.1"));
      ASSERT_TRUE(Shell("openssl x509 -req -days 2 -in " + d + "/" + c[0] +
                        ".csr -CA " + d + "/" + c[1] + ".pem -CAkey " + d +
                        "/" + c[1] + ".key -CAcreateserial -out " + d + "/" +
                        c[0] + ".pem -extfile " + d + "/" + c[2]));
    }
    const testing::CommandResult made =
        RunCommand({CliBinary(), "init-model", "--arch=based", "--preset=tiny",
                    "--out=" + d + "/model", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Path(const std::string& name) {
    return dir_->path() + "/" + name;
  }

  // TLS server flags; with `mtls` client certificates are required.
  static std::vector<std::string> ServerTls(bool mtls) {
    std::vector<std::string> flags = {"--tls-cert=" + Path("server.pem"),
                                      "--tls-key=" + Path("server.key")};
    if (mtls) flags.push_back("--tls-client-ca=" + Path("ca.pem"));
    return flags;
  }

  std::unique_ptr<ServerProcess> Start(const std::string& name,
                                       std::vector<std::string> flags) {
    flags.push_back("--model=" + Path("model"));
    flags.push_back("--data-dir=" + data_.path() + "/" + name);
    auto server = std::make_unique<ServerProcess>();
    EXPECT_TRUE(server->Start(flags, data_.path() + "/" + name + ".log"))
        << server->stderr_text();
    return server;
  }

  // A TLS channel trusting `ca`, presenting the certificate `client` (name
  // of a .pem/.key pair; empty = none).
  static std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address,
                                                   const std::string& ca,
                                                   const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(Path(ca + ".pem"));
    if (!client.empty()) {
      ssl.pem_cert_chain = ReadFile(Path(client + ".pem"));
      ssl.pem_private_key = ReadFile(Path(client + ".key"));
    }
    return grpc::CreateChannel(address, grpc::SslCredentials(ssl));
  }

  // ListModels over a channel with `ca` as trust roots (empty = plaintext)
  // and an optional client certificate `client` (name of a .pem/.key pair).
  static grpc::Status ListModels(const std::string& address,
                                 const std::string& ca,
                                 const std::string& client = "",
                                 const std::string& token = "") {
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (ca.empty()) {
      credentials = grpc::InsecureChannelCredentials();
    } else {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = ReadFile(Path(ca + ".pem"));
      if (!client.empty()) {
        ssl.pem_cert_chain = ReadFile(Path(client + ".pem"));
        ssl.pem_private_key = ReadFile(Path(client + ".key"));
      }
      credentials = grpc::SslCredentials(ssl);
    }
    auto stub =
        v1::Orchestrator::NewStub(grpc::CreateChannel(address, credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::ListModelsRequest request;
    v1::ListModelsResponse response;
    return stub->ListModels(&context, request, &response);
  }

  static TempDir* dir_;
  TempDir data_;
};

TempDir* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, TlsWorksWithTheRightCaAndFailsWithAWrongOne) {
  std::unique_ptr<ServerProcess> server = Start("tls", ServerTls(false));
  const std::string address = server->address();
  EXPECT_OK(ListModels(address, "ca"));
  // Wrong trust roots: the handshake fails.
  EXPECT_EQ(ListModels(address, "other-ca").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A plaintext client cannot talk to a TLS listener.
  EXPECT_EQ(ListModels(address, "").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The CLI with --tls-ca.
  const testing::CommandResult ok =
      RunCommand({CliBinary(), "models", "--server=" + address,
                  "--tls-ca=" + Path("ca.pem"), "--json"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  const testing::CommandResult wrong = RunCommand(
      {CliBinary(), "models", "--server=" + address,
       "--tls-ca=" + Path("other-ca.pem"), "--json", "--timeout-seconds=5"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("UNAVAILABLE"), std::string::npos) << wrong.out;
}

TEST_F(TlsTest, MutualTlsRejectsClientsWithoutAValidCertificate) {
  std::unique_ptr<ServerProcess> server = Start("mtls", ServerTls(true));
  const std::string address = server->address();
  EXPECT_OK(ListModels(address, "ca", "client"));
  EXPECT_EQ(ListModels(address, "ca").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListModels(address, "ca", "stranger").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  const testing::CommandResult cli = RunCommand(
      {CliBinary(), "models", "--server=" + address,
       "--tls-ca=" + Path("ca.pem"), "--tls-cert=" + Path("client.pem"),
       "--tls-key=" + Path("client.key"), "--json"});
  EXPECT_EQ(cli.exit_code, 0) << cli.out;
}

TEST_F(TlsTest, PlaintextOnlyOnLoopbackUnlessAllowed) {
  ServerProcess refused;
  EXPECT_FALSE(refused.Start({"--listen=0.0.0.0:0", "--model=" + Path("model"),
                              "--data-dir=" + data_.path() + "/refused"},
                             data_.path() + "/refused.log"));
  EXPECT_NE(refused.exit_code(), 0);
  EXPECT_NE(refused.stderr_text().find("plaintext"), std::string::npos)
      << refused.stderr_text();

  // TLS makes any address acceptable.
  std::vector<std::string> tls = ServerTls(false);
  tls.push_back("--listen=0.0.0.0:0");
  std::unique_ptr<ServerProcess> secure = Start("secure", tls);
  const std::string port =
      secure->address().substr(secure->address().rfind(':') + 1);
  EXPECT_OK(ListModels("127.0.0.1:" + port, "ca"));

  // --allow-plaintext: listens, with a warning.
  std::unique_ptr<ServerProcess> allowed =
      Start("allowed", {"--listen=0.0.0.0:0", "--allow-plaintext"});
  const std::string allowed_port =
      allowed->address().substr(allowed->address().rfind(':') + 1);
  EXPECT_OK(ListModels("127.0.0.1:" + allowed_port, ""));
  EXPECT_NE(allowed->stderr_text().find("server.plaintext"), std::string::npos);

  // Half a key pair is refused.
  ServerProcess half;
  EXPECT_FALSE(half.Start(
      {"--tls-cert=" + Path("server.pem"), "--model=" + Path("model"),
       "--data-dir=" + data_.path() + "/half"},
      data_.path() + "/half.log"));
}

// The disaggregated pipeline over mTLS: every role requires client
// certificates, calls the others with its own, and the orchestrator, with
// tenant tokens, is trusted by prefill, decode and store through its
// certificate. A peer without one reaches no internal RPC.
TEST_F(TlsTest, DisaggregatedRolesOverMutualTls) {
  WriteFile(Path("tokens"), std::string(kAlice) + " alice\n");
  // Each role serves and calls with its own certificate, requires client
  // certificates of the CA, and trusts the roles' names: the recipe of
  // docs/SECURITY.md, on 0.0.0.0 as in a cluster.
  auto with = [&](const std::string& role, std::vector<std::string> flags) {
    flags.push_back("--role=" + role);
    flags.push_back("--listen=0.0.0.0:0");
    flags.push_back("--tls-cert=" + Path(role + ".pem"));
    flags.push_back("--tls-key=" + Path(role + ".key"));
    flags.push_back("--tls-client-ca=" + Path("ca.pem"));
    flags.push_back("--tls-ca=" + Path("ca.pem"));
    flags.push_back(InternalPeerNames());
    return flags;
  };
  auto local = [](const ServerProcess& server) {
    return "127.0.0.1:" +
           server.address().substr(server.address().rfind(':') + 1);
  };
  std::unique_ptr<ServerProcess> store = Start("store", with("store", {}));
  const std::string use_store = "--store-address=" + local(*store);
  std::unique_ptr<ServerProcess> prefill =
      Start("prefill", with("prefill", {use_store}));
  std::unique_ptr<ServerProcess> decode =
      Start("decode", with("decode", {use_store}));
  std::unique_ptr<ServerProcess> orchestrator = Start(
      "orchestrator",
      with("orchestrator", {use_store, "--prefill-address=" + local(*prefill),
                            "--decode-address=" + local(*decode),
                            "--auth-tokens-file=" + Path("tokens")}));
  WriteFile(Path("doc.txt"),
            "The cat sat on the mat while the dog slept by the door.");
  const std::vector<std::string> client = {
      "--server=" + local(*orchestrator), "--tls-ca=" + Path("ca.pem"),
      "--tls-cert=" + Path("client.pem"), "--tls-key=" + Path("client.key"),
      "--json"};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), CliBinary());
    args.insert(args.end(), client.begin(), client.end());
    return RunCommand(args);
  };
  const testing::CommandResult ingested =
      cli({"ingest", Path("doc.txt"), "--token=" + std::string(kAlice)});
  ASSERT_EQ(ingested.exit_code, 0)
      << ingested.out << orchestrator->stderr_text();
  const size_t at = ingested.out.find("doc-");
  ASSERT_NE(at, std::string::npos) << ingested.out;
  const std::string id = ingested.out.substr(at, 28);
  const testing::CommandResult asked =
      cli({"ask", id, "Where did the cat sit?", "--max-tokens=3",
           "--token=" + std::string(kAlice)});
  EXPECT_EQ(asked.exit_code, 0) << asked.out << decode->stderr_text();
  // The certificate is not a tenant token.
  const testing::CommandResult anonymous = cli({"docs"});
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_NE(anonymous.out.find("UNAUTHENTICATED"), std::string::npos);
  // A peer with the wrong CA's certificate cannot reach the prefill role.
  EXPECT_EQ(ListModels(local(*prefill), "ca", "stranger").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A public client's certificate of the same CA, with a tenant token or
  // without, reaches no internal RPC of any role.
  testing::ProbeTarget target{"alice", id, {}};
  target.state_key.set_digest(std::string(32, 'k'));
  const std::vector<std::pair<const ServerProcess*, std::string>> roles = {
      {store.get(), "Store/"},
      {prefill.get(), "Prefill/"},
      {decode.get(), "Decode/"}};
  for (const auto& [role, served] : roles) {
    for (const std::string& token : {std::string(), std::string(kAlice)}) {
      for (const auto& [rpc, code] : testing::CallEveryInternalRpc(
               TlsChannel(local(*role), "ca", "client"), token, target)) {
        // The role's own service refuses the caller; the others are not
        // served by this role at all.
        EXPECT_EQ(code, rpc.rfind(served, 0) == 0
                            ? grpc::StatusCode::UNAUTHENTICATED
                            : grpc::StatusCode::UNIMPLEMENTED)
            << rpc << " on " << role->address();
      }
    }
  }
  // The store role's certificate names a role the others do not list.
  const testing::ProbeResults as_store = testing::CallEveryInternalRpc(
      TlsChannel(local(*decode), "ca", "store"), "", target);
  EXPECT_EQ(as_store.back().second, grpc::StatusCode::UNAUTHENTICATED);
  // The orchestrator's identity is trusted: Decode/Stats answers.
  const testing::ProbeResults as_orchestrator = testing::CallEveryInternalRpc(
      TlsChannel(local(*decode), "ca", "orchestrator"), "", target);
  EXPECT_EQ(as_orchestrator.back().first, "Decode/Stats");
  EXPECT_EQ(as_orchestrator.back().second, grpc::StatusCode::OK);
  // Alice's document is intact after all of it.
  const testing::CommandResult again =
      cli({"ask", id, "Where did the cat sit?", "--max-tokens=3",
           "--token=" + std::string(kAlice)});
  EXPECT_EQ(again.exit_code, 0) << again.out;
}

// The hole this suite guards: on role all with mTLS and tenant tokens, a
// public client holding a certificate of the client CA and its own token
// calls every Store, Prefill and Decode RPC for another tenant. Each is
// refused, and the victim's document is intact afterwards.
TEST_F(TlsTest, PublicClientCertificateReachesNoOtherTenant) {
  constexpr char kBob[] = "bob-token-abcdefghijkl";
  WriteFile(Path("two-tenants"),
            std::string(kAlice) + " alice\n" + kBob + " bob\n");
  std::vector<std::string> flags = ServerTls(true);
  flags.push_back("--auth-tokens-file=" + Path("two-tenants"));
  std::unique_ptr<ServerProcess> server = Start("all-mtls", flags);
  WriteFile(Path("bob.txt"), "Bob keeps his notes here: the key is blue.");
  auto cli = [&](std::vector<std::string> args, const char* token) {
    args.insert(args.begin(), CliBinary());
    for (const std::string& flag :
         {"--server=" + server->address(), "--tls-ca=" + Path("ca.pem"),
          "--tls-cert=" + Path("client.pem"), "--tls-key=" + Path("client.key"),
          "--token=" + std::string(token), std::string("--json")}) {
      args.push_back(flag);
    }
    return RunCommand(args);
  };
  const testing::CommandResult ingested =
      cli({"ingest", Path("bob.txt"), "--doc-id=bob-notes"}, kBob);
  ASSERT_EQ(ingested.exit_code, 0) << ingested.out << server->stderr_text();

  // Bob's first state key, as the attacker might have learned it.
  auto orchestrator =
      v1::Orchestrator::NewStub(TlsChannel(server->address(), "ca", "client"));
  v1::DocumentInfo before;
  {
    auto context = testing::ProbeContext(kBob);
    v1::GetDocumentRequest request;
    request.set_document_id("bob-notes");
    ASSERT_TRUE(
        orchestrator->GetDocument(context.get(), request, &before).ok());
    ASSERT_GT(before.segments_size(), 0);
  }
  const testing::ProbeTarget target{"bob", "bob-notes",
                                    before.segments(0).state_key()};
  for (const std::string& token : {std::string(kAlice), std::string()}) {
    for (const auto& [rpc, code] : testing::CallEveryInternalRpc(
             TlsChannel(server->address(), "ca", "client"), token, target)) {
      EXPECT_TRUE(code == grpc::StatusCode::PERMISSION_DENIED ||
                  code == grpc::StatusCode::UNAUTHENTICATED)
          << rpc << " answered " << code << " to alice";
    }
  }
  // Admin RPCs: alice's token is no admin's.
  auto store =
      v1::Store::NewStub(TlsChannel(server->address(), "ca", "client"));
  {
    auto context = testing::ProbeContext(kAlice);
    v1::StoreStats stats;
    EXPECT_EQ(store->Stats(context.get(), v1::StoreStatsRequest(), &stats)
                  .error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Bob's document: same record, and it still answers.
  v1::DocumentInfo after;
  {
    auto context = testing::ProbeContext(kBob);
    v1::GetDocumentRequest request;
    request.set_document_id("bob-notes");
    ASSERT_OK(orchestrator->GetDocument(context.get(), request, &after));
  }
  EXPECT_EQ(after.tokens(), before.tokens());
  EXPECT_EQ(after.segments_size(), before.segments_size());
  const testing::CommandResult asked = cli(
      {"ask", "bob-notes", "What colour is the key?", "--max-tokens=2"}, kBob);
  EXPECT_EQ(asked.exit_code, 0) << asked.out;
  const testing::CommandResult listed = cli({"docs"}, kAlice);
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_EQ(listed.out.find("bob-notes"), std::string::npos) << listed.out;
}

// Internal roles never serve unauthenticated off loopback, TLS or not;
// internal credentials (a token file, or peer names under mTLS) let them.
TEST_F(TlsTest, InternalRolesRefuseToServeUnauthenticatedOffLoopback) {
  WriteFile(Path("internal-refusal"), "internal-secret-0123456789abcdef\n");
  for (const std::string role : {"store", "prefill", "decode"}) {
    for (const std::vector<std::string>& security :
         {std::vector<std::string>{"--allow-plaintext"}, ServerTls(false),
          ServerTls(true)}) {
      std::vector<std::string> flags = {"--role=" + role, "--listen=0.0.0.0:0",
                                        "--model=" + Path("model"),
                                        "--data-dir=" + data_.path() + "/r"};
      flags.insert(flags.end(), security.begin(), security.end());
      ServerProcess refused;
      EXPECT_FALSE(refused.Start(flags, data_.path() + "/refused.log")) << role;
      EXPECT_NE(refused.stderr_text().find("--internal_token_file"),
                std::string::npos)
          << refused.stderr_text();
      EXPECT_NE(refused.stderr_text().find("--internal_peer_names"),
                std::string::npos);
    }
  }
  // With a token file the same role starts.
  std::unique_ptr<ServerProcess> prefill =
      Start("prefill-off-loopback",
            {"--role=prefill", "--listen=0.0.0.0:0", "--allow-plaintext",
             "--internal-token-file=" + Path("internal-refusal")});
  EXPECT_FALSE(prefill->address().empty()) << prefill->stderr_text();
  // Peer names without client certificates to read them from: refused.
  ServerProcess names_only;
  EXPECT_FALSE(names_only.Start(
      {"--role=decode", "--model=" + Path("model"),
       "--data-dir=" + data_.path() + "/names", InternalPeerNames()},
      data_.path() + "/names.log"));
  EXPECT_NE(names_only.stderr_text().find("--tls_client_ca"), std::string::npos)
      << names_only.stderr_text();
  // Role all's internal listener off loopback needs credentials too.
  ServerProcess all_internal;
  EXPECT_FALSE(all_internal.Start(
      {"--internal-listen=0.0.0.0:0", "--allow-plaintext",
       "--model=" + Path("model"), "--data-dir=" + data_.path() + "/all-int"},
      data_.path() + "/all-internal.log"));
  EXPECT_NE(all_internal.stderr_text().find("--internal_token_file"),
            std::string::npos)
      << all_internal.stderr_text();
}

// Role all in a mixed deployment: its internal services listen on
// --internal-listen for peers with the internal token, and never on the
// public listener, whatever the caller presents.
TEST_F(TlsTest, RoleAllServesInternalServicesOnlyOnTheInternalListener) {
  const std::string internal_token = "internal-secret-0123456789abcdef";
  WriteFile(Path("internal-all"), internal_token + "\n");
  WriteFile(Path("tokens-all"), std::string(kAlice) + " alice\n");
  std::unique_ptr<ServerProcess> server =
      Start("all-internal", {"--internal-listen=127.0.0.1:0",
                             "--internal-token-file=" + Path("internal-all"),
                             "--auth-tokens-file=" + Path("tokens-all")});
  ASSERT_FALSE(server->internal_address().empty()) << server->stderr_text();
  const testing::ProbeTarget target{"alice", "missing", {}};
  auto plaintext = [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  };
  for (const auto& [rpc, code] : testing::CallEveryInternalRpc(
           plaintext(server->address()), internal_token, target)) {
    EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED) << rpc;
  }
  for (const auto& [rpc, code] : testing::CallEveryInternalRpc(
           plaintext(server->internal_address()), kAlice, target)) {
    EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED) << rpc;
  }
  // A public listener that cannot be bound fails startup at once, although
  // the internal server had already started (it is stopped, not waited
  // for forever).
  ServerProcess unbound;
  EXPECT_FALSE(unbound.Start(
      {"--listen=256.1.1.1:0", "--allow-plaintext",
       "--internal-listen=127.0.0.1:0", "--model=" + Path("model"),
       "--data-dir=" + data_.path() + "/unbound"},
      data_.path() + "/unbound.log"));
  EXPECT_NE(unbound.stderr_text().find("cannot listen on 256.1.1.1:0"),
            std::string::npos)
      << unbound.stderr_text();
  // With the internal token the calls get past authentication: they fail
  // on their content (or succeed), never on who is calling.
  for (const auto& [rpc, code] : testing::CallEveryInternalRpc(
           plaintext(server->internal_address()), internal_token, target)) {
    EXPECT_NE(code, grpc::StatusCode::UNAUTHENTICATED) << rpc;
    EXPECT_NE(code, grpc::StatusCode::PERMISSION_DENIED) << rpc;
    EXPECT_NE(code, grpc::StatusCode::UNKNOWN) << rpc;
  }
}

// Without TLS, internal roles trust only callers with the internal token.
TEST_F(TlsTest, InternalTokenGuardsInternalRoles) {
  WriteFile(Path("internal"), "internal-secret-0123456789abcdef\n");
  std::unique_ptr<ServerProcess> prefill =
      Start("prefill-token",
            {"--role=prefill", "--internal-token-file=" + Path("internal")});
  auto stub = v1::Prefill::NewStub(grpc::CreateChannel(
      prefill->address(), grpc::InsecureChannelCredentials()));
  for (const std::string& token :
       {std::string(), std::string("internal-secret-0123456789abcdeX")}) {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    auto stream = stub->Prefill(&context);
    stream->WritesDone();
    v1::PrefillResponse response;
    while (stream->Read(&response)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // With the token the call gets past authentication (and fails on its
  // empty request instead).
  grpc::ClientContext context;
  context.AddMetadata("authorization",
                      "Bearer internal-secret-0123456789abcdef");
  auto stream = stub->Prefill(&context);
  stream->WritesDone();
  v1::PrefillResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // An orchestrator with tenant tokens but no internal credential for its
  // remote roles is refused at startup.
  WriteFile(Path("tokens-only"), std::string(kAlice) + " alice\n");
  ServerProcess orchestrator;
  EXPECT_FALSE(orchestrator.Start(
      {"--role=orchestrator", "--model=" + Path("model"),
       "--data-dir=" + data_.path() + "/orchestrator-refused",
       "--prefill-address=" + prefill->address(),
       "--decode-address=" + prefill->address(),
       "--auth-tokens-file=" + Path("tokens-only")},
      data_.path() + "/orchestrator-refused.log"));
  EXPECT_NE(orchestrator.stderr_text().find("--internal_token_file"),
            std::string::npos)
      << orchestrator.stderr_text();
}

}  // namespace
}  // namespace twice::services
