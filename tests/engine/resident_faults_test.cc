// The resident executor and ResidentModel when the device fails
// (faulty_executor_device.h over the CPU device): a failure before a
// call's work touched a state changes nothing and the call can simply be
// repeated; one after it damages exactly the call's states and never reads
// RESOURCE_EXHAUSTED (which callers take as "make room and retry"); and a
// damaged state neither gets spilled nor blocks other states' reads.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "engine/executor/resident_executor.h"
#include "engine/executor/resident_model.h"
#include "engine/models/stacked_model.h"
#include "engine/state/state_codec.h"
#include "gtest/gtest.h"
#include "tests/engine/faulty_executor_device.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using testing::DeviceFaults;
using testing::FaultyExecutorDevice;
using testing::RandomTokens;
using testing::TempDir;

constexpr int kFaultVocab = 300;

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

class ResidentFaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const char* arch : {"mamba2", "llama", "rat"}) {
      ASSERT_OK(
          testing::WriteTinyModelOf(arch, dir_->Sub(arch), 41, kFaultVocab));
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // An executor of `arch` on the CPU device; with `faults`, behind the
  // faulty device that plans them.
  // `tweak` changes the options first.
  std::unique_ptr<ResidentExecutor> NewExecutor(
      const std::string& arch, std::shared_ptr<DeviceFaults> faults,
      const std::function<void(ResidentExecutorOptions&)>& tweak = {}) {
    models_.push_back(testing::LoadOrDie(dir_->Sub(arch)));
    const auto* stacked =
        dynamic_cast<const StackedModel*>(models_.back().get());
    EXPECT_NE(stacked, nullptr);
    if (stacked == nullptr) return nullptr;
    ResidentExecutorOptions o;
    o.slots = 4;
    o.prefill_chunk = 16;
    if (tweak) tweak(o);
    std::unique_ptr<ExecutorDevice> device = NewCpuExecutorDevice();
    if (faults != nullptr) {
      device = std::make_unique<FaultyExecutorDevice>(std::move(device),
                                                      std::move(faults));
    }
    absl::StatusOr<std::unique_ptr<ResidentExecutor>> e =
        ResidentExecutor::Create(*stacked, std::move(device), o);
    EXPECT_OK(e);
    return e.ok() ? *std::move(e) : nullptr;
  }

  // A ResidentModel of `arch` with `slots` slots behind the faulty device
  // that plans `faults` (reads one by one: no shared passes).
  static absl::StatusOr<std::unique_ptr<ResidentModel>> NewResidentModel(
      const std::string& arch, int32_t slots,
      std::shared_ptr<DeviceFaults> faults) {
    ResidentExecutorOptions options;
    options.slots = slots;
    return ResidentModel::Create(testing::LoadOrDie(dir_->Sub(arch)),
                                 std::make_unique<FaultyExecutorDevice>(
                                     NewCpuExecutorDevice(), std::move(faults)),
                                 options, /*share_prefill_passes=*/false);
  }

  static TempDir* dir_;
  std::vector<std::unique_ptr<Model>> models_;
};

TempDir* ResidentFaultsTest::dir_ = nullptr;

// Llama keeps its keys and values in paged blocks: each read uploads its
// sequences' block tables before the first pass.
TEST_F(ResidentFaultsTest, AFailedTableUploadChangesNothingAndCanBeRetried) {
  auto faults = std::make_shared<DeviceFaults>();
  std::unique_ptr<ResidentExecutor> e = NewExecutor("llama", faults);
  std::unique_ptr<ResidentExecutor> clean = NewExecutor("llama", nullptr);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(clean, nullptr);
  const std::vector<int32_t> first = RandomTokens(20, kFaultVocab, 1);
  const std::vector<int32_t> more_a = RandomTokens(30, kFaultVocab, 2);
  const std::vector<int32_t> read_b = RandomTokens(7, kFaultVocab, 3);
  const std::vector<absl::Span<const int32_t>> reads = {more_a, read_b};
  std::vector<float> want;
  {
    ASSERT_OK_AND_ASSIGN(SlotId a, clean->NewSequence());
    ASSERT_OK_AND_ASSIGN(SlotId b, clean->NewSequence());
    ASSERT_OK(clean->Prefill(a, first));
    ASSERT_OK_AND_ASSIGN(want, clean->PrefillBatch({a, b}, reads));
  }
  ASSERT_OK_AND_ASSIGN(SlotId a, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId b, e->NewSequence());
  ASSERT_OK(e->Prefill(a, first));
  // The second table of the call fails, after the first went up.
  faults->FailCall("UploadBlockTable", 2,
                   absl::ResourceExhaustedError("no device memory left"));
  const int64_t embeddings = faults->calls("Embedding");
  const int64_t free_blocks = e->free_kv_blocks();
  const absl::Status failed = e->PrefillBatch({a, b}, reads).status();
  ASSERT_TRUE(faults->fired());
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_EQ(faults->calls("Embedding"), embeddings) << "a pass ran";
  // The blocks the call reserved for the tokens it did not read are free.
  EXPECT_EQ(e->free_kv_blocks(), free_blocks);
  EXPECT_FALSE(e->IsDamaged(a));
  EXPECT_FALSE(e->IsDamaged(b));
  ASSERT_OK_AND_ASSIGN(int64_t count, e->TokenCount(a));
  EXPECT_EQ(count, 20);
  // The same call again reads as if the failed one had never been made.
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, e->PrefillBatch({a, b}, reads));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
}

// Llama's and RAT's attention read a pass of short reads as rows: one
// slot map and one table per pass, one attention call (and for RAT one
// chunk scan) per layer for all the pass's sequences. Read 1 continues at
// position 12, so its rows cross a KV block (of 16) and close RAT's first chunk
// (of 16), which its last row reads in the same call. A map that does not reach
// the device only costs the pass its one call: it goes by segments. RAT
// (`scans_chunks`) also scans the pass's reads in one call per layer.
void ExpectShortReadsAttendInOneCallPerLayer(ResidentExecutor& e,
                                             ResidentExecutor& clean,
                                             DeviceFaults& faults,
                                             const std::string& attention_op,
                                             bool scans_chunks) {
  const std::vector<int32_t> first = RandomTokens(12, kFaultVocab, 21);
  const std::vector<int32_t> read_a = RandomTokens(5, kFaultVocab, 22);
  const std::vector<int32_t> read_b = RandomTokens(6, kFaultVocab, 23);
  const std::vector<absl::Span<const int32_t>> reads = {read_a, read_b};
  // What each read gives alone (one segment per pass).
  std::vector<float> want;
  {
    ASSERT_OK_AND_ASSIGN(SlotId a, clean.NewSequence());
    ASSERT_OK_AND_ASSIGN(SlotId b, clean.NewSequence());
    ASSERT_OK(clean.Prefill(a, first));
    ASSERT_OK_AND_ASSIGN(want, clean.Prefill(a, read_a));
    ASSERT_OK_AND_ASSIGN(std::vector<float> want_b, clean.Prefill(b, read_b));
    want.insert(want.end(), want_b.begin(), want_b.end());
  }
  // Two pairs of slots, each with a sequence that has read `first`
  // (one read, one segment: attended as a prefill, one call per layer).
  std::vector<SlotId> pair_1, pair_2;
  int64_t per_pass = 0;
  for (std::vector<SlotId>* pair : {&pair_1, &pair_2}) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK_AND_ASSIGN(SlotId slot, e.NewSequence());
      pair->push_back(slot);
    }
    const int64_t attention = faults.calls(attention_op);
    ASSERT_OK(e.Prefill((*pair)[0], first));
    per_pass = faults.calls(attention_op) - attention;
  }
  ASSERT_GT(per_pass, 0);
  EXPECT_EQ(faults.calls("UploadSlotMap"), 0);

  // As rows: the same number of attention calls as one read, one map,
  // and the logits each read gets alone.
  int64_t attention = faults.calls(attention_op);
  int64_t scans = faults.calls("RatChunkScan");
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, e.PrefillBatch(pair_1, reads));
  EXPECT_EQ(faults.calls(attention_op) - attention, per_pass);
  EXPECT_EQ(faults.calls("UploadSlotMap"), 1);
  EXPECT_EQ(faults.calls("RatChunkScan"), scans);
  EXPECT_EQ(faults.calls("RatChunkScanSegments"), scans_chunks ? per_pass : 0);
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);

  // The map refused: by segments, the same logits.
  faults.FailCall("UploadSlotMap", 1,
                  absl::ResourceExhaustedError("no device memory left"));
  attention = faults.calls(attention_op);
  scans = faults.calls("RatChunkScan");
  ASSERT_OK_AND_ASSIGN(got, e.PrefillBatch(pair_2, reads));
  EXPECT_TRUE(faults.fired());
  EXPECT_EQ(faults.calls(attention_op) - attention, 2 * per_pass);
  EXPECT_EQ(faults.calls("RatChunkScan") - scans,
            scans_chunks ? 2 * per_pass : 0);
  EXPECT_EQ(faults.calls("RatChunkScanSegments"), scans_chunks ? per_pass : 0);
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  EXPECT_FALSE(e.IsDamaged(pair_2[0]));
}

TEST_F(ResidentFaultsTest, APassOfShortReadsAttendsInOneCallPerLayer) {
  for (const auto& [arch, op] :
       {std::pair<std::string, std::string>{"llama", "PagedAttention"},
        {"rat", "RatPagedAttention"}}) {
    SCOPED_TRACE(arch);
    auto faults = std::make_shared<DeviceFaults>();
    std::unique_ptr<ResidentExecutor> e = NewExecutor(arch, faults);
    std::unique_ptr<ResidentExecutor> clean = NewExecutor(arch, nullptr);
    ASSERT_NE(e, nullptr);
    ASSERT_NE(clean, nullptr);
    ExpectShortReadsAttendInOneCallPerLayer(*e, *clean, *faults, op,
                                            /*scans_chunks=*/arch == "rat");
  }
}

// A pass past either of the executor's row-form bounds goes by segments,
// with the same logits: 11 rows, the longest block list 3 blocks of 16 (a
// sequence at 40 tokens): 33 table entries; 5 rows at positions 40-44
// and 6 at 0-5 attend 41 + ... + 45 + 1 + ... + 6 = 236 positions.
TEST_F(ResidentFaultsTest, PassesPastTheRowFormBoundsGoBySegments) {
  std::unique_ptr<ResidentExecutor> clean = NewExecutor("llama", nullptr);
  ASSERT_NE(clean, nullptr);
  const std::vector<int32_t> first = RandomTokens(40, kFaultVocab, 31);
  const std::vector<int32_t> read_a = RandomTokens(5, kFaultVocab, 32);
  const std::vector<int32_t> read_b = RandomTokens(6, kFaultVocab, 33);
  const std::vector<absl::Span<const int32_t>> reads = {read_a, read_b};
  ASSERT_OK_AND_ASSIGN(SlotId clean_a, clean->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId clean_b, clean->NewSequence());
  ASSERT_OK(clean->Prefill(clean_a, first));
  ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                       clean->PrefillBatch({clean_a, clean_b}, reads));
  for (const auto& [bound, at_bound] :
       {std::pair<int64_t ResidentExecutorOptions::*, int64_t>{
            &ResidentExecutorOptions::row_form_max_table_entries, 33},
        {&ResidentExecutorOptions::row_form_max_attended_positions, 236}}) {
    for (const int64_t limit : {at_bound, at_bound - 1}) {
      SCOPED_TRACE(::testing::Message() << limit);
      auto faults = std::make_shared<DeviceFaults>();
      std::unique_ptr<ResidentExecutor> e =
          NewExecutor("llama", faults,
                      [&](ResidentExecutorOptions& o) { o.*bound = limit; });
      ASSERT_NE(e, nullptr);
      ASSERT_OK_AND_ASSIGN(SlotId a, e->NewSequence());
      ASSERT_OK_AND_ASSIGN(SlotId b, e->NewSequence());
      ASSERT_OK_AND_ASSIGN(SlotId other, e->NewSequence());
      ASSERT_OK(e->Prefill(a, first));
      // One pass of one read: one attention call per layer.
      int64_t attention = faults->calls("PagedAttention");
      ASSERT_OK(e->Prefill(other, RandomTokens(4, kFaultVocab, 34)));
      const int64_t per_pass = faults->calls("PagedAttention") - attention;
      ASSERT_GT(per_pass, 0);
      attention = faults->calls("PagedAttention");
      ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                           e->PrefillBatch({a, b}, reads));
      const bool as_rows = limit == at_bound;
      EXPECT_EQ(faults->calls("UploadSlotMap"), as_rows ? 1 : 0);
      EXPECT_EQ(faults->calls("PagedAttention") - attention,
                as_rows ? per_pass : 2 * per_pass);
      EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
    }
  }
}

TEST_F(ResidentFaultsTest, AFailureAfterThePassesRanDamagesOnlyTheCallsSlots) {
  auto faults = std::make_shared<DeviceFaults>();
  std::unique_ptr<ResidentExecutor> e = NewExecutor("mamba2", faults);
  ASSERT_NE(e, nullptr);
  ASSERT_OK_AND_ASSIGN(SlotId a, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId b, e->NewSequence());
  ASSERT_OK_AND_ASSIGN(SlotId other, e->NewSequence());
  ASSERT_OK(e->Prefill(other, RandomTokens(9, kFaultVocab, 4)));
  const std::vector<int32_t> ta = RandomTokens(40, kFaultVocab, 5);
  const std::vector<int32_t> tb = RandomTokens(5, kFaultVocab, 6);
  // The copy of the logits to the host, after every pass has run.
  faults->FailCall("CopyAllToHost", 1,
                   absl::ResourceExhaustedError("no device memory left"));
  const absl::Status failed = e->PrefillBatch({a, b}, {ta, tb}).status();
  ASSERT_TRUE(faults->fired());
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  EXPECT_TRUE(Mentions(failed, "no device memory left")) << failed;
  EXPECT_TRUE(Mentions(failed, "damaged")) << failed;
  EXPECT_TRUE(e->IsDamaged(a));
  EXPECT_TRUE(e->IsDamaged(b));
  EXPECT_FALSE(e->IsDamaged(other));
  EXPECT_EQ(e->Prefill(a, tb).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The slot outside the call goes on; a released slot is whole again.
  const kernels::SamplingRule greedy[] = {{}};
  const SlotId just_other[] = {other};
  ASSERT_OK(e->Step(std::vector<int32_t>{3}, just_other, greedy));
  ASSERT_OK(e->Release(a));
  ASSERT_OK_AND_ASSIGN(SlotId again, e->NewSequence());
  EXPECT_FALSE(e->IsDamaged(again));
  ASSERT_OK(e->Prefill(again, ta));
}

TEST_F(ResidentFaultsTest, ADecodeStepDamagesOnlyOnceItsWorkBegan) {
  auto faults = std::make_shared<DeviceFaults>();
  std::unique_ptr<ResidentExecutor> e = NewExecutor("mamba2", faults);
  std::unique_ptr<ResidentExecutor> clean = NewExecutor("mamba2", nullptr);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(clean, nullptr);
  const std::vector<int32_t> prompt = RandomTokens(12, kFaultVocab, 7);
  const kernels::SamplingRule greedy[] = {{}};
  ASSERT_OK_AND_ASSIGN(SlotId want_slot, clean->NewSequence());
  ASSERT_OK(clean->Prefill(want_slot, prompt));
  const SlotId want_one[] = {want_slot};
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> want,
                       clean->Step(std::vector<int32_t>{5}, want_one, greedy));

  ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
  ASSERT_OK(e->Prefill(slot, prompt));
  const SlotId one[] = {slot};
  // Filling the step's inputs fails: the state has not moved.
  faults->FailCall("FillStep", 1, absl::UnavailableError("device busy"));
  EXPECT_EQ(e->Step(std::vector<int32_t>{5}, one, greedy).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_FALSE(e->IsDamaged(slot));
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> got,
                       e->Step(std::vector<int32_t>{5}, one, greedy));
  EXPECT_EQ(got, want);
  // A step to logits whose slot map does not reach the device: nothing ran.
  faults->FailCall("UploadSlotMap", 1,
                   absl::ResourceExhaustedError("no device memory left"));
  EXPECT_EQ(e->StepLogits(std::vector<int32_t>{got[0]}, one).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(e->IsDamaged(slot));
  // The ids' copy back fails after the step ran: the state moved.
  faults->FailCall("CopyStepIds", 1,
                   absl::ResourceExhaustedError("no pinned memory left"));
  const absl::Status failed =
      e->Step(std::vector<int32_t>{got[0]}, one, greedy).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  EXPECT_TRUE(e->IsDamaged(slot));
}

// A Llama state of 16 tokens fills its blocks of 16, so its next step
// takes a block; a step that fails before it ran gives it back.
TEST_F(ResidentFaultsTest, AStepRefusedBeforeItRanGivesBackItsNewBlock) {
  auto faults = std::make_shared<DeviceFaults>();
  std::unique_ptr<ResidentExecutor> e = NewExecutor("llama", faults);
  ASSERT_NE(e, nullptr);
  ASSERT_OK_AND_ASSIGN(SlotId slot, e->NewSequence());
  ASSERT_OK(e->Prefill(slot, RandomTokens(16, kFaultVocab, 8)));
  const SlotId one[] = {slot};
  const kernels::SamplingRule greedy[] = {{}};
  const int64_t free_blocks = e->free_kv_blocks();
  faults->FailCall("FillStep", 1, absl::UnavailableError("device busy"));
  EXPECT_EQ(e->Step(std::vector<int32_t>{5}, one, greedy).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(e->free_kv_blocks(), free_blocks);
  faults->FailCall("UploadSlotMap", 1, absl::UnavailableError("device busy"));
  EXPECT_EQ(e->StepLogits(std::vector<int32_t>{5}, one).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(e->free_kv_blocks(), free_blocks);
  // A step that runs keeps it.
  ASSERT_OK(e->Step(std::vector<int32_t>{5}, one, greedy).status());
  EXPECT_EQ(e->free_kv_blocks(), free_blocks - 1);
}

// Two slots; a state damaged by a failed read keeps its slot while its
// owner holds it. Reading two more states must spill the healthy one, not
// try (and fail) to save the damaged one.
TEST_F(ResidentFaultsTest, ADamagedStateIsNeverChosenForSpilling) {
  auto faults = std::make_shared<DeviceFaults>();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ResidentModel> resident,
                       NewResidentModel("mamba2", 2, faults));
  std::unique_ptr<Model> host = testing::LoadOrDie(dir_->Sub("mamba2"));
  std::unique_ptr<SequenceState> damaged = resident->NewState();
  std::unique_ptr<SequenceState> first = resident->NewState();
  std::unique_ptr<SequenceState> second = resident->NewState();
  ASSERT_OK(resident->Prefill(RandomTokens(10, kFaultVocab, 8), *damaged,
                              PrefillMode::kCausal));
  faults->FailCall("CopyAllToHost", 1, absl::InternalError("device fault"));
  EXPECT_FALSE(resident
                   ->Prefill(RandomTokens(10, kFaultVocab, 9), *damaged,
                             PrefillMode::kCausal)
                   .ok());
  ASSERT_TRUE(damaged->damaged());

  const std::vector<int32_t> t1 = RandomTokens(14, kFaultVocab, 10);
  const std::vector<int32_t> t2 = RandomTokens(6, kFaultVocab, 11);
  ASSERT_OK(resident->Prefill(t1, *first, PrefillMode::kCausal));
  // No free slot: `first` is spilled (the damaged state is older).
  ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                       resident->Prefill(t2, *second, PrefillMode::kCausal));
  std::unique_ptr<SequenceState> on_host = host->NewState();
  ASSERT_OK_AND_ASSIGN(std::vector<float> want,
                       host->Prefill(t2, *on_host, PrefillMode::kCausal));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
  // And comes back from its spilled copy where it was.
  const std::vector<int32_t> t3 = RandomTokens(5, kFaultVocab, 12);
  ASSERT_OK_AND_ASSIGN(got,
                       resident->Prefill(t3, *first, PrefillMode::kCausal));
  on_host = host->NewState();
  ASSERT_OK(host->Prefill(t1, *on_host, PrefillMode::kCausal));
  ASSERT_OK_AND_ASSIGN(want, host->Prefill(t3, *on_host, PrefillMode::kCausal));
  EXPECT_LE(testing::ExcessOverSummationOrder(got, want), 0.0);
}

// A device out of memory before a read began answers RESOURCE_EXHAUSTED
// like a full KV cache, but spilling idle states frees no device memory:
// the read fails as it is and the idle state stays where it was.
TEST_F(ResidentFaultsTest, ADeviceOutOfMemorySpillsNoIdleState) {
  auto faults = std::make_shared<DeviceFaults>();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ResidentModel> resident,
                       NewResidentModel("llama", 4, faults));
  std::unique_ptr<SequenceState> idle = resident->NewState();
  std::unique_ptr<SequenceState> reader = resident->NewState();
  ASSERT_OK(resident->Prefill(RandomTokens(12, kFaultVocab, 14), *idle,
                              PrefillMode::kCausal));
  faults->FailCall("UploadBlockTable", 1,
                   absl::ResourceExhaustedError("device out of memory"));
  const int64_t to_host = resident->executor().traffic().bytes_to_host;
  const absl::Status failed = resident
                                  ->Prefill(RandomTokens(8, kFaultVocab, 15),
                                            *reader, PrefillMode::kCausal)
                                  .status();
  ASSERT_TRUE(faults->fired());
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_FALSE(reader->damaged());
  EXPECT_EQ(resident->executor().traffic().bytes_to_host, to_host)
      << "an idle state was spilled";
  EXPECT_OK(resident->Prefill(RandomTokens(8, kFaultVocab, 15), *reader,
                              PrefillMode::kCausal));
}

// A state whose first read on the device fails: its host layers were never
// marked stale, but they are not what a state of its token count holds
// either, so it neither syncs nor encodes (the store never saves it).
TEST_F(ResidentFaultsTest, ADamagedStateIsNeverEncoded) {
  auto faults = std::make_shared<DeviceFaults>();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ResidentModel> resident,
                       NewResidentModel("mamba2", 8, faults));
  std::unique_ptr<SequenceState> state = resident->NewState();
  faults->FailCall("CopyAllToHost", 1, absl::InternalError("device fault"));
  const absl::Status failed = resident
                                  ->Prefill(RandomTokens(10, kFaultVocab, 13),
                                            *state, PrefillMode::kCausal)
                                  .status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  ASSERT_TRUE(state->damaged());
  EXPECT_EQ(state->SyncToHost().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EncodeState(*state), "");
  EXPECT_TRUE(state->Clone()->damaged());
}

}  // namespace
}  // namespace twice::engine
