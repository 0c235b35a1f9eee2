// `twice-bench load` against a real twice-server (role all, real store):
// a short mixed load in every mode completes with no error, no lost
// document and no changed answer, and reports the server's memory; and a
// baseline whose answers were altered is caught (the check can fail).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/server_process.h"

namespace twice {
namespace {

using testing::BenchBinary;
using testing::RunCommand;
using testing::ServerProcess;
using testing::TempDir;

nlohmann::json LastJsonLine(const std::string& out) {
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '{') last = line;
  }
  return nlohmann::json::parse(last, nullptr, false);
}

TEST(LoadBenchTest, MixedLoadLosesNothingAndAnswersStay) {
  TempDir data;
  ServerProcess server;
  const std::string log = data.path() + "/server.log";
  ASSERT_TRUE(server.Start(
      {"--model=qa=models/jrt-qa", "--data-dir=" + data.path() + "/store",
       "--metrics_listen=127.0.0.1:0"},
      log))
      << server.stderr_text();
  const int metrics_port = testing::MetricsPort(server.stderr_text());
  ASSERT_GT(metrics_port, 0) << server.stderr_text();
  const std::string metrics = "127.0.0.1:" + std::to_string(metrics_port);
  const std::string baseline = data.path() + "/answers.json";

  const testing::CommandResult run = RunCommand(
      {BenchBinary(), "load", "--server=" + server.address(),
       "--load_seconds=3", "--load_clients=4", "--load_doc_tokens=128",
       "--load_append_tokens=32", "--metrics=" + metrics,
       // Appends drawn often enough that a slow (sanitized) run of a few
       // dozen operations still has some.
       "--load_mix=ingest:1,append:3,ask:6,batch_ask:2",
       "--answers_out=" + baseline, "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const nlohmann::json r = LastJsonLine(run.out);
  ASSERT_FALSE(r.is_discarded()) << run.out;
  EXPECT_EQ(r["model"], "qa");
  EXPECT_EQ(r["documents_lost"], 0) << run.out;
  EXPECT_EQ(r["unclean_errors"], 0) << run.out;
  EXPECT_TRUE(r["errors"].empty()) << run.out;
  EXPECT_EQ(r["answers_differ_in_run"], 0) << run.out;
  EXPECT_GT(r["answers"].get<int64_t>(), 0);
  EXPECT_GT(r["documents_verified"].get<int64_t>(), 0);
  // Every operation kind and every ask mode of a JRT model ran and
  // succeeded.
  for (const char* op :
       {"ingest", "append", "batch_ask", "ask:default", "ask:read_twice",
        "ask:read_twice_full", "ask:prefix", "ask:prefix_with_question"}) {
    ASSERT_TRUE(r["ops"].contains(op)) << op << " missing: " << run.out;
    EXPECT_GT(r["ops"][op]["calls"].get<int64_t>(), 0) << op;
    EXPECT_EQ(r["ops"][op]["calls"], r["ops"][op]["ok"]) << op;
  }
  ASSERT_EQ(r["memory"].size(), 1u);
  EXPECT_GT(r["memory"][0]["start_bytes"].get<double>(), 1 << 20);
  EXPECT_GE(r["memory"][0]["peak_bytes"].get<double>(),
            r["memory"][0]["start_bytes"].get<double>());

  // The same workload again against the baseline: every answer agrees.
  const testing::CommandResult again = RunCommand(
      {BenchBinary(), "load", "--server=" + server.address(),
       "--load_seconds=2", "--load_clients=4", "--load_doc_tokens=128",
       "--load_append_tokens=32", "--answers_in=" + baseline, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.out;
  const nlohmann::json r2 = LastJsonLine(again.out);
  EXPECT_GT(r2["answers_compared_to_baseline"].get<int64_t>(), 0);
  EXPECT_EQ(r2["answers_differ_from_baseline"], 0);

  // A baseline with every answer altered: the run must say they differ
  // and exit 1.
  nlohmann::json book;
  {
    std::ifstream in(baseline);
    book = nlohmann::json::parse(in, nullptr, false);
  }
  ASSERT_FALSE(book.is_discarded());
  for (auto& [key, ids] : book["answers"].items()) {
    ASSERT_FALSE(ids.empty()) << key;
    ids[0] = ids[0].get<int>() + 1;
  }
  std::ofstream(baseline) << book.dump();
  const testing::CommandResult altered = RunCommand(
      {BenchBinary(), "load", "--server=" + server.address(),
       "--load_seconds=1", "--load_clients=2", "--load_doc_tokens=128",
       "--load_append_tokens=32", "--answers_in=" + baseline, "--json"});
  EXPECT_EQ(altered.exit_code, 1) << altered.out;
  const nlohmann::json r3 = LastJsonLine(altered.out);
  EXPECT_GT(r3["answers_differ_from_baseline"].get<int64_t>(), 0)
      << altered.out;

  // A baseline of another workload is refused, not compared.
  const testing::CommandResult other =
      RunCommand({BenchBinary(), "load", "--server=" + server.address(),
                  "--load_seconds=1", "--load_doc_tokens=64",
                  "--answers_in=" + baseline, "--json"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.out.find("FAILED_PRECONDITION"), std::string::npos)
      << other.out;
}

}  // namespace
}  // namespace twice
