// GrowStateTo (bench/synthetic_state.h) on states a resident executor
// holds: the grown state is what the next read continues, not the device
// copy of what was read before it (the decode rows of `twice-bench engine
// --executor=resident` time a step at the grown position).
#include "bench/synthetic_state.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/executor/resident_model.h"
#include "engine/models/init_model.h"
#include "engine/models/model.h"
#include "gtest/gtest.h"
#include "tests/testing/grpc_status_matchers.h"

namespace twice::bench {
namespace {

TEST(SyntheticStateTest, AResidentStateIsReadAtItsGrownPosition) {
  const std::string dir =
      (std::filesystem::temp_directory_path() /
       ("twice-synthetic-state-test-" + std::to_string(::getpid())))
          .string();
  for (const char* arch : {"llama", "rat"}) {
    SCOPED_TRACE(arch);
    engine::InitModelOptions init;
    init.architecture = arch;
    init.preset = "tiny";
    init.out_dir = dir + "/" + arch;
    init.tokenizer_json = "models/tokenizers/gpt2/tokenizer.json";
    ASSERT_OK(engine::WriteRandomModel(init));
    engine::LoadOptions load;
    load.resident = true;
    load.resident_slots = 2;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<engine::Model> model,
                         engine::LoadModel(init.out_dir, load));
    ASSERT_TRUE(engine::IsResidentModel(*model));
    std::unique_ptr<engine::SequenceState> state = model->NewState();
    ASSERT_OK(model->Prefill(std::vector<int32_t>{5, 6, 7, 8}, *state,
                             engine::PrefillMode::kCausal));
    ASSERT_OK(GrowStateTo(*state, 300, 1));
    ASSERT_OK(model->Step(9, *state));
    EXPECT_EQ(state->token_count(), 301);
    // The host copy holds the grown rows and the step's.
    ASSERT_OK(state->SyncToHost());
    EXPECT_EQ(state->token_count(), 301);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twice::bench
