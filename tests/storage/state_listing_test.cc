// StateStore::ListStates over a real RocksDB store: every state exactly
// once, in key order, page by page; chunked states listed once (their
// blocks not at all); deletes between pages; bad arguments.
#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/storage/store_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::storage {
namespace {

using test_util::Key;
using test_util::RandomBytes;

using StateListingTest = test_util::StoreFixture;

// Every page of `store` at `page_size`, in order.
std::vector<StateListing> ListAll(StateStore& store, int page_size,
                                  int* pages = nullptr) {
  std::vector<StateListing> all;
  std::string token;
  int count = 0;
  do {
    absl::StatusOr<StatePage> page = store.ListStates(page_size, token);
    EXPECT_OK(page);
    if (!page.ok()) break;
    EXPECT_LE(static_cast<int>(page->states.size()), page_size);
    all.insert(all.end(), page->states.begin(), page->states.end());
    token = page->next_page_token;
    ++count;
  } while (!token.empty() && count < 1000);
  if (pages != nullptr) *pages = count;
  return all;
}

TEST_F(StateListingTest, EveryStateOnceInKeyOrder) {
  Open();
  std::set<std::string> put;
  for (int i = 0; i < 23; ++i) {
    PutStateOptions options;
    options.tenant = i % 2 == 0 ? "even" : "odd";
    ASSERT_OK(store().PutState(Key(i), RandomBytes(100 + i, i), options));
    put.insert(Key(i).Hex());
  }
  // A chunked state of three blocks is one listing.
  const std::vector<std::string> blocks = {
      RandomBytes(50, 1), RandomBytes(60, 2), RandomBytes(70, 3)};
  const std::vector<std::string_view> views(blocks.begin(), blocks.end());
  ASSERT_OK(store().PutStateBlocks(Key(100), std::nullopt, views, {}));
  put.insert(Key(100).Hex());

  int pages = 0;
  const std::vector<StateListing> listed = ListAll(store(), 5, &pages);
  EXPECT_EQ(pages, 5);  // 24 states, 5 a page
  std::vector<std::string> keys;
  for (const StateListing& state : listed) {
    keys.push_back(std::string(state.key.Bytes()));
    EXPECT_GT(state.stored_bytes, 0);
    EXPECT_GT(state.written_unix_ms, 0);
    EXPECT_EQ(state.chunked, state.key == Key(100));
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  std::set<std::string> seen;
  for (const StateListing& state : listed) seen.insert(state.key.Hex());
  EXPECT_EQ(listed.size(), seen.size()) << "a state was listed twice";
  EXPECT_EQ(seen, put);
  for (const StateListing& state : listed) {
    if (state.key == Key(2)) {
      EXPECT_EQ(state.tenant, "even");
    }
    if (state.key == Key(3)) {
      EXPECT_EQ(state.tenant, "odd");
    }
  }
}

TEST_F(StateListingTest, StatesDeletedBetweenPagesAreSkipped) {
  Open();
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(store().PutState(Key(i), RandomBytes(64, i), {}));
  }
  ASSERT_OK_AND_ASSIGN(StatePage first, store().ListStates(4, ""));
  ASSERT_EQ(first.states.size(), 4u);
  ASSERT_FALSE(first.next_page_token.empty());
  // The state the token points after, and one not listed yet, go.
  ASSERT_OK(store().DeleteState(first.states.back().key));
  ASSERT_OK_AND_ASSIGN(StatePage second,
                       store().ListStates(0, first.next_page_token));
  ASSERT_EQ(second.states.size(), 6u);
  EXPECT_TRUE(second.next_page_token.empty());
  ASSERT_OK(store().DeleteState(second.states.back().key));
  ASSERT_OK_AND_ASSIGN(StatePage again,
                       store().ListStates(0, first.next_page_token));
  EXPECT_EQ(again.states.size(), 5u);
  for (const StateListing& state : again.states) {
    EXPECT_LT(std::string(first.states.back().key.Bytes()),
              std::string(state.key.Bytes()));
  }
}

TEST_F(StateListingTest, EmptyStoreAndBadArguments) {
  Open();
  ASSERT_OK_AND_ASSIGN(StatePage empty, store().ListStates(0, ""));
  EXPECT_TRUE(empty.states.empty());
  EXPECT_TRUE(empty.next_page_token.empty());
  EXPECT_EQ(store().ListStates(-1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store().ListStates(kMaxStatePageSize + 1, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store().ListStates(10, "not-a-token").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store().ListStates(10, std::string(64, 'g')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StateKeyHexTest, RoundTripsAndRejectsOtherText) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(StateKey parsed, StateKey::FromHex(Key(i).Hex()));
    EXPECT_EQ(parsed, Key(i));
  }
  std::string upper = Key(7).Hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  ASSERT_OK_AND_ASSIGN(StateKey from_upper, StateKey::FromHex(upper));
  EXPECT_EQ(from_upper, Key(7));
  EXPECT_FALSE(StateKey::FromHex(Key(1).Hex().substr(2)).ok());
  std::string bad = Key(1).Hex();
  bad[10] = 'z';
  EXPECT_FALSE(StateKey::FromHex(bad).ok());
}

}  // namespace
}  // namespace twice::storage
