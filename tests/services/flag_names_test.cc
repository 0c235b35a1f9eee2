#include "services/common/flag_names.h"

#include "gtest/gtest.h"
#include "services/common/sha256.h"
#include "services/orchestrator/document_ids.h"
#include "tests/testing/grpc_status_matchers.h"

namespace twice::services {
namespace {

TEST(FlagNamesTest, DashesBecomeUnderscoresInNamesOnly) {
  std::vector<std::string> in = {
      "twice-server", "--data-dir=/a-b", "--max-new-tokens", "5", "pos-arg",
      "--",           "--not-a-flag"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  const std::vector<std::string> out =
      NormalizeFlagNames(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(out[0], "twice-server");
  EXPECT_EQ(out[1], "--data_dir=/a-b");
  EXPECT_EQ(out[2], "--max_new_tokens");
  EXPECT_EQ(out[4], "pos-arg");
  EXPECT_EQ(out[6], "--not-a-flag");
}

TEST(DocumentIdsTest, ValidationAndDerivation) {
  EXPECT_OK(ValidateDocumentId("doc-1.a_b:c"));
  EXPECT_FALSE(ValidateDocumentId("").ok());
  EXPECT_FALSE(ValidateDocumentId("a/b").ok());
  EXPECT_FALSE(ValidateDocumentId(std::string(129, 'a')).ok());
  const std::vector<int32_t> tokens = {1, 2, 3};
  const std::string id = DeriveDocumentId("fp", "tenant", tokens);
  EXPECT_EQ(id.size(), 4u + 24u);
  EXPECT_OK(ValidateDocumentId(id));
  EXPECT_EQ(id, DeriveDocumentId("fp", "tenant", tokens));
  EXPECT_NE(id, DeriveDocumentId("fp", "other", tokens));
  EXPECT_NE(id, DeriveDocumentId("fp", "tenant", {1, 2, 4}));
  // SHA-256("abc"), FIPS 180-2 test vector.
  EXPECT_EQ(HexSha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace twice::services
