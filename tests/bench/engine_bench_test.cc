// The engine benchmark's analytic cost model against the model files it
// describes, and one quick end-to-end run of the runner on the tiny preset
// (every reported number present and plausible, JSON keys as documented).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/engine_bench_runner.h"
#include "bench/engine_cost.h"
#include "engine/models/init_model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/grpc_status_matchers.h"

namespace twice::bench {
namespace {

constexpr char kTokenizer[] = "models/tokenizers/gpt2/tokenizer.json";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::move(buf).str();
}

// Bytes of tensor data in a safetensors file: size - 8 - header length.
int64_t SafetensorsDataBytes(const std::string& path) {
  const std::string bytes = ReadFile(path);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) {
    header = (header << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return static_cast<int64_t>(bytes.size()) - 8 - static_cast<int64_t>(header);
}

class EngineCostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("twice-engine-cost-test-" + std::to_string(::getpid())))
               .string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes the tiny preset of `arch` under dir_/arch; its cost model.
  EngineCost WriteTiny(const std::string& arch) {
    engine::InitModelOptions init;
    init.architecture = arch;
    init.preset = "tiny";
    init.out_dir = dir_ + "/" + arch;
    init.tokenizer_json = kTokenizer;
    const absl::Status written = engine::WriteRandomModel(init);
    EXPECT_OK(written);
    absl::StatusOr<EngineCost> cost =
        EngineCost::FromConfigJson(ReadFile(init.out_dir + "/config.json"));
    EXPECT_OK(cost);
    return *std::move(cost);
  }

  std::string dir_;
};

TEST_F(EngineCostTest, WeightBytesMatchTheWrittenTinyModel) {
  engine::InitModelOptions init;
  init.preset = "tiny";
  init.out_dir = dir_;
  init.tokenizer_json = kTokenizer;
  ASSERT_OK(engine::WriteRandomModel(init));
  absl::StatusOr<EngineCost> cost =
      EngineCost::FromConfigJson(ReadFile(dir_ + "/config.json"));
  ASSERT_OK(cost);
  EXPECT_FALSE(cost->is_jrt());
  EXPECT_EQ(cost->weight_bytes(),
            SafetensorsDataBytes(dir_ + "/model.safetensors"));
  // Tied head: a step reads every weight (the embedding as the LM head).
  EXPECT_EQ(cost->decode_weight_bytes(), cost->weight_bytes());
  EXPECT_EQ(cost->ReadTokens(100), 100);
  // Work grows at least linearly with the prompt; the LM head is a fixed
  // 2·d·V on top.
  const double one = cost->PrefillFlops(1), many = cost->PrefillFlops(1000);
  EXPECT_GT(one, 2.0 * 64 * 50264);
  EXPECT_GT(many, 500.0 * (one - 2.0 * 64 * 50264));
}

TEST_F(EngineCostTest, BasedTinyFlopsByHand) {
  // d 64, 4 layers: conv, linear attention (4 heads, F 16), window (32 left),
  // conv; MLP hidden 256 (n_inner 128 rounded up); conv inner 128, K 3;
  // vocab padded 50264.
  engine::InitModelOptions init;
  init.preset = "tiny";
  init.out_dir = dir_;
  init.tokenizer_json = kTokenizer;
  ASSERT_OK(engine::WriteRandomModel(init));
  absl::StatusOr<EngineCost> cost =
      EngineCost::FromConfigJson(ReadFile(dir_ + "/config.json"));
  ASSERT_OK(cost);
  const double t = 10, d = 64, h = 256, c = 128, heads = 4, f = 16;
  const double feat = 1 + f + f * f, hd = d / heads;
  const double mlp = 4 * (2 * t * d * 2 * h + 2 * t * h * d);
  const double conv = 2 * (2 * t * d * 2 * c + 2 * t * c * d + 2 * 3 * c * t);
  const double la = 2 * t * d * (2 * heads * f + 2 * d) +
                    2 * t * heads * (2 * f * f + f) +
                    t * heads * (4 * hd * feat + 4 * feat);
  // Query i sees min(i, 32) + 1 keys: 1 + 2 + ... + 10 = 55 for 10 tokens.
  const double swa = 2 * t * d * 3 * d + 2 * t * d * d + 4 * d * 55;
  const double head = 2 * d * 50264;
  EXPECT_DOUBLE_EQ(cost->PrefillFlops(10), mlp + conv + la + swa + head);
}

TEST_F(EngineCostTest, LlamaAndRatWeightBytesMatchTheWrittenModels) {
  for (const char* arch : {"llama", "rat"}) {
    const EngineCost cost = WriteTiny(arch);
    EXPECT_EQ(cost.weight_bytes(),
              SafetensorsDataBytes(dir_ + "/" + arch + "/model.safetensors"))
        << arch;
    EXPECT_EQ(cost.decode_weight_bytes(), cost.weight_bytes()) << arch;
  }
}

TEST_F(EngineCostTest, LlamaAndRatTinyFlopsByHand) {
  const double vocab = 50257, t = 40, d = 64;
  // Llama tiny: d 64, 2 layers, 4 query heads and 2 KV heads of 16, SwiGLU
  // 128.
  const double q = 64, kv = 32, inter = 128;
  const double llama = 2 * t * d * (q + 2 * kv) + 2 * t * q * d +
                       4 * 16 * 4 * (t * (t + 1) / 2) + 6 * t * d * inter;
  EXPECT_DOUBLE_EQ(WriteTiny("llama").PrefillFlops(40),
                   2 * llama + 2 * d * vocab);
  // RAT tiny: D 64, 2 RAT layers, 2 q/k groups of head dim 16, L 16, FFN
  // 256. Token t sees floor(t/16) closed chunks + its own: 16·0 + 16·1 +
  // 8·2 + 40.
  const double keys = 0 + 16 + 16 + 40;
  const double rat = 2 * t * d * (3 * d + 2 * 2 * 16) + 2 * t * d * d +
                     4 * d * keys + 4 * t * d * 256;
  EXPECT_DOUBLE_EQ(WriteTiny("rat").PrefillFlops(40), 2 * rat + 2 * d * vocab);
}

// Runs the tiny preset of `arch` (a list) quickly; the rows, in order.
std::vector<EngineBenchRow> RunQuick(const std::string& arch,
                                     std::vector<int64_t> tokens,
                                     std::vector<int64_t> decode_positions,
                                     std::vector<int64_t> decode_batches = {
                                         1}) {
  EngineBenchOptions options;
  options.arch = arch;
  options.preset = "tiny";
  options.tokens = std::move(tokens);
  options.decode_positions = std::move(decode_positions);
  options.decode_batches = std::move(decode_batches);
  options.decode_steps = 2;
  options.min_seconds = 0.01;
  options.tokenizer_json = kTokenizer;
  std::vector<EngineBenchRow> rows;
  const absl::Status status = RunEngineBench(
      options, [&](const EngineBenchRow& r) { rows.push_back(r); });
  EXPECT_OK(status);
  return rows;
}

TEST(EngineBenchTest, DecodeRowsShowFixedAndGrowingStates) {
  const std::vector<EngineBenchRow> rows =
      RunQuick("mamba2,llama,rat", {}, {100, 1000});
  ASSERT_EQ(rows.size(), 6u);
  for (const EngineBenchRow& r : rows) {
    EXPECT_EQ(r.kind, "decode");
    EXPECT_GT(r.decode_tokens_per_s, 0);
    EXPECT_GT(r.decode_bound_tokens_per_s, 0);
    const nlohmann::json j = nlohmann::json::parse(EngineBenchRowJson(r));
    EXPECT_EQ(j["decode_position"], r.decode_position);
    EXPECT_EQ(j["kind"], "decode");
    EXPECT_FALSE(EngineBenchTableRow(r).empty());
  }
  EXPECT_EQ(rows[0].arch, "mamba2");
  EXPECT_EQ(rows[0].decode_position, 100);
  EXPECT_EQ(rows[1].decode_position, 1000);
  // Mamba-2: a fixed-size state.
  EXPECT_EQ(rows[1].state_bytes, rows[0].state_bytes);
  // Llama tiny: 2 layers x (K + V) x 900 more rows x 2 KV heads x 16 x f32.
  EXPECT_EQ(rows[3].arch, "llama");
  EXPECT_EQ(rows[3].state_bytes - rows[2].state_bytes, 2 * 2 * 900 * 32 * 4);
  // RAT tiny (L 16): 2 layers x (k̄ + v̄) x (62 - 6) more closed chunks x 64.
  EXPECT_EQ(rows[5].arch, "rat");
  EXPECT_EQ(rows[5].state_bytes - rows[4].state_bytes, 2 * 2 * 56 * 64 * 4);
}

// --decode_batches: one row per batch size at each position; a batch of
// B steps B sequences (tok/s counts them all) and its bound holds the
// weights once and B states.
TEST(EngineBenchTest, DecodeBatchesGiveOneRowEach) {
  const std::vector<EngineBenchRow> rows =
      RunQuick("mamba2", {}, {100}, {1, 4});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].decode_batch, 1);
  EXPECT_EQ(rows[1].decode_batch, 4);
  for (const EngineBenchRow& r : rows) {
    EXPECT_EQ(r.decode_position, 100);
    EXPECT_GT(r.decode_tokens_per_s, 0);
    const double bound = static_cast<double>(r.decode_batch) * r.memory_gbps *
                         1e9 /
                         static_cast<double>(r.decode_weight_bytes +
                                             r.decode_batch * r.state_bytes);
    EXPECT_DOUBLE_EQ(r.decode_bound_tokens_per_s, bound);
    const nlohmann::json j = nlohmann::json::parse(EngineBenchRowJson(r));
    EXPECT_EQ(j["decode_batch"], r.decode_batch);
  }

  EngineBenchOptions options;
  options.tokenizer_json = kTokenizer;
  options.tokens = {};
  options.decode_positions = {10};
  options.decode_batches = {0};
  EXPECT_EQ(RunEngineBench(options, [](const EngineBenchRow&) {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EngineBenchTest, TinyRunReportsEveryColumn) {
  const std::vector<EngineBenchRow> rows = RunQuick("based", {8, 70}, {});
  ASSERT_EQ(rows.size(), 2u);
  for (const EngineBenchRow& r : rows) {
    EXPECT_GT(r.prefill_tokens_per_s, 0);
    EXPECT_GT(r.prefill_gflops, 0);
    EXPECT_GT(r.sgemm_gflops, 0);
    EXPECT_GT(r.decode_tokens_per_s, 0);
    EXPECT_GT(r.decode_bound_tokens_per_s, 0);
    EXPECT_GT(r.state_bytes, 0);
    EXPECT_GT(r.peak_rss_bytes, r.weight_bytes / 2);
    const nlohmann::json j = nlohmann::json::parse(EngineBenchRowJson(r));
    for (const char* key :
         {"arch", "preset", "tokens", "prefill_tokens_per_s", "prefill_gflops",
          "sgemm_gflops", "decode_tokens_per_s", "decode_bound_tokens_per_s",
          "state_bytes", "peak_rss_bytes"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["arch"], "based");
    EXPECT_EQ(j["decode_position"], r.tokens);
  }
  EXPECT_EQ(rows[1].tokens, 70);
  EXPECT_FALSE(EngineBenchTableRow(rows[0]).empty());
}

TEST(EngineBenchTest, RejectsBadOptions) {
  EngineBenchOptions options;
  options.tokenizer_json = kTokenizer;
  options.tokens = {0};
  EXPECT_EQ(RunEngineBench(options, [](const EngineBenchRow&) {}).code(),
            absl::StatusCode::kInvalidArgument);
  options.tokens = {4};
  options.arch = "no-such-arch";
  EXPECT_EQ(RunEngineBench(options, [](const EngineBenchRow&) {}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::bench
