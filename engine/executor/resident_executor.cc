#include "engine/executor/resident_executor.h"

#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/executor/resident_layers.h"
#include "engine/models/state_checks.h"
#include "kernels/status_macros.h"

namespace twice::engine {

// One block on the device: its norms' weights, its mixer (with the state
// pool) and its feed-forward, if any.
struct ResidentExecutor::Block {
  const StackedModel::Block* host = nullptr;
  std::unique_ptr<DeviceArray> norm1_w, norm2_w;
  std::unique_ptr<ResidentMixer> mixer;
  std::unique_ptr<ResidentFeedForward> ffn;  // null: a mixer-only block
};

absl::Status SupportsResident(const StackedModel& model) {
  if (model.blocks().empty()) {
    return absl::InvalidArgumentError("the model has no layers");
  }
  for (const StackedModel::Block& b : model.blocks()) {
    TWICE_RETURN_IF_ERROR(NewResidentMixer(*b.mixer).status());
    if (b.ffn != nullptr) {
      TWICE_RETURN_IF_ERROR(NewResidentFeedForward(*b.ffn).status());
    }
  }
  return absl::OkStatus();
}

namespace {

// Whether steps on `device` are padded to buckets (step_padding).
bool PadsSteps(const ResidentExecutorOptions& options,
               const ExecutorDevice& device) {
  using Padding = ResidentExecutorOptions::StepPadding;
  return options.step_padding == Padding::kAlways ||
         (options.step_padding == Padding::kWhileRecording &&
          options.step_graphs && device.records_graphs());
}

// The most rows any step bucket pads (StepBucketRows), 0 without padding.
int32_t PadSlotsFor(const ResidentExecutorOptions& options,
                    const ExecutorDevice& device) {
  if (!PadsSteps(options, device)) return 0;
  int64_t most = 0;
  for (int64_t b = 1; b <= options.slots; ++b) {
    most = std::max(most, StepBucketRows(b, options.slots) - b);
  }
  return static_cast<int32_t>(most);
}

}  // namespace

ResidentExecutor::ResidentExecutor(const StackedModel& model,
                                   std::unique_ptr<ExecutorDevice> device,
                                   const ResidentExecutorOptions& options)
    : model_(model),
      device_(std::move(device)),
      options_(options),
      dim_(model.description().hidden_size),
      vocab_rows_(model.description().padded_vocab_size),
      rows_(std::max({options.prefill_chunk, int64_t{options.slots},
                      model.description().prefix_length})),
      pad_slots_(PadSlotsFor(options, *device_)),
      state_slots_(options.slots + pad_slots_),
      pool_(options.slots),
      slot_info_(static_cast<size_t>(options.slots)),
      // A block per padding slot on top of the caller's tokens.
      kv_tables_(options.kv_cache_tokens, options.kv_block_size, state_slots_,
                 pad_slots_),
      step_graphs_(options.step_graphs) {}

ResidentExecutor::~ResidentExecutor() = default;

absl::StatusOr<std::unique_ptr<ResidentExecutor>> ResidentExecutor::Create(
    const StackedModel& model, std::unique_ptr<ExecutorDevice> device,
    const ResidentExecutorOptions& options) {
  if (device == nullptr) {
    return absl::InvalidArgumentError("ResidentExecutor: no device");
  }
  if (options.slots < 1 || options.slots > 65536 || options.prefill_chunk < 1 ||
      options.kv_block_size < 1 || options.kv_cache_tokens < 0 ||
      options.kv_cache_tokens / options.kv_block_size >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResidentExecutor: need 1 <= slots <= 65536, prefill_chunk >= 1, "
        "kv_block_size >= 1 and 0 <= kv_cache_tokens < 2^31 blocks; got "
        "slots ",
        options.slots, ", prefill_chunk ", options.prefill_chunk,
        ", kv_block_size ", options.kv_block_size, ", kv_cache_tokens ",
        options.kv_cache_tokens));
  }
  TWICE_RETURN_IF_ERROR(SupportsResident(model));
  std::unique_ptr<ResidentExecutor> e(
      new ResidentExecutor(model, std::move(device), options));
  TWICE_RETURN_IF_ERROR(e->Load());
  return e;
}

absl::Status ResidentExecutor::Load() {
  ExecutorDevice& dev = *device_;
  TWICE_RETURN_IF_ERROR(dev.MakeCurrent());
  TWICE_ASSIGN_OR_RETURN(embedding_, dev.UploadMatrix(model_.embedding()));
  // A tied head is the embedding's buffer: one device copy serves both.
  if (model_.lm_head().raw_data() != model_.embedding().raw_data()) {
    TWICE_ASSIGN_OR_RETURN(lm_head_, dev.UploadMatrix(model_.lm_head()));
  }
  TWICE_ASSIGN_OR_RETURN(
      final_norm_, UploadVector(dev, model_.final_norm().weight().span()));
  weight_bytes_ = embedding_->bytes() +
                  (lm_head_ != nullptr ? lm_head_->bytes() : 0) +
                  ArrayBytes(*final_norm_);
  int64_t scratch = 0;
  for (const StackedModel::Block& b : model_.blocks()) {
    auto block = std::make_unique<Block>();
    block->host = &b;
    TWICE_ASSIGN_OR_RETURN(block->norm1_w,
                           UploadVector(dev, b.norm1.weight().span()));
    TWICE_ASSIGN_OR_RETURN(block->mixer, NewResidentMixer(*b.mixer));
    block->mixer->set_residual_scale(model_.residual_scale());
    ResidentPools pools{state_slots_, nullptr, -1};
    if (const int64_t per_row = block->mixer->kv_tokens_per_row();
        per_row > 0) {
      pools.kv_table = kv_tables_.Register(per_row);
      pools.kv_blocks = &kv_tables_.table(pools.kv_table);
    }
    TWICE_RETURN_IF_ERROR(block->mixer->Load(dev, pools));
    reads_pass_rows_ = reads_pass_rows_ || block->mixer->reads_pass_rows();
    weight_bytes_ += ArrayBytes(*block->norm1_w) + block->mixer->weight_bytes();
    scratch = std::max(scratch, block->mixer->ScratchFloats(rows_));
    if (b.ffn != nullptr) {
      TWICE_ASSIGN_OR_RETURN(block->norm2_w,
                             UploadVector(dev, b.norm2.weight().span()));
      TWICE_ASSIGN_OR_RETURN(block->ffn, NewResidentFeedForward(*b.ffn));
      block->ffn->set_residual_scale(model_.residual_scale());
      TWICE_RETURN_IF_ERROR(block->ffn->Load(dev));
      weight_bytes_ += ArrayBytes(*block->norm2_w) + block->ffn->weight_bytes();
      scratch = std::max(scratch, block->ffn->ScratchFloats(rows_));
    }
    blocks_.push_back(std::move(block));
  }
  // Workspace, sized once for the largest pass.
  TWICE_ASSIGN_OR_RETURN(x_, dev.Allocate(rows_ * dim_));
  TWICE_ASSIGN_OR_RETURN(h_, dev.Allocate(rows_ * dim_));
  // The scratch also gathers a prefill pass's last rows for the head.
  scratch = std::max(scratch, rows_ * dim_);
  TWICE_ASSIGN_OR_RETURN(scratch_, dev.Allocate(scratch));
  TWICE_ASSIGN_OR_RETURN(logits_, dev.Allocate(options_.slots * vocab_rows_));
  if (pad_slots_ > 0 && !kv_tables_.empty()) {
    // Each padding row's one token at position 0 (pools start zeroed).
    std::vector<int32_t> pads(static_cast<size_t>(pad_slots_));
    for (int32_t j = 0; j < pad_slots_; ++j) pads[j] = options_.slots + j;
    const std::vector<int64_t> one(pads.size(), 1);
    TWICE_RETURN_IF_ERROR(kv_tables_.Reserve(pads, one));
  }
  return dev.Synchronize();
}

int64_t ResidentExecutor::state_bytes_per_slot() const {
  int64_t floats = 0;
  for (const auto& b : blocks_) {
    if (b->mixer->kv_tokens_per_row() == 0) {
      floats += b->mixer->state_floats_per_slot();
    }
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

int64_t ResidentExecutor::kv_bytes_per_token() const {
  double bytes = 0.0;
  for (const auto& b : blocks_) {
    if (const int64_t per_row = b->mixer->kv_tokens_per_row(); per_row > 0) {
      bytes += static_cast<double>(b->mixer->state_floats_per_slot()) *
               sizeof(float) / static_cast<double>(per_row);
    }
  }
  return static_cast<int64_t>(bytes + 0.5);
}

int64_t ResidentExecutor::free_kv_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kv_tables_.free_blocks();
}

int64_t ResidentExecutor::free_kv_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kv_tables_.free_tokens();
}

absl::Status ResidentExecutor::ReserveKv(absl::Span<const SlotId> slots,
                                         int64_t extra) {
  const std::vector<int64_t> each(slots.size(), extra);
  return ReserveKv(slots, each);
}

absl::Status ResidentExecutor::ReserveKv(absl::Span<const SlotId> slots,
                                         absl::Span<const int64_t> extra) {
  if (kv_tables_.empty()) return absl::OkStatus();
  std::vector<int32_t> indices(slots.size());
  std::vector<int64_t> tokens(slots.size());
  for (size_t b = 0; b < slots.size(); ++b) {
    indices[b] = slots[b].index;
    tokens[b] = slot_info_[slots[b].index].tokens + extra[b];
  }
  return kv_tables_.Reserve(indices, tokens);
}

void ResidentExecutor::ReturnUnreadKv(absl::Span<const SlotId> slots) {
  for (const SlotId& slot : slots) {
    kv_tables_.Shrink(slot.index, slot_info_[slot.index].tokens);
  }
}

absl::StatusOr<ResidentExecutor::PassTables> ResidentExecutor::PassKvTables(
    absl::Span<const SlotId> slots) {
  PassTables tables;
  if (kv_tables_.empty()) return tables;
  std::vector<int32_t> indices(slots.size());
  for (size_t b = 0; b < slots.size(); ++b) indices[b] = slots[b].index;
  TWICE_ASSIGN_OR_RETURN(tables.owned, kv_tables_.Upload(*device_, indices));
  for (const auto& t : tables.owned) tables.views.push_back(t.get());
  return tables;
}

absl::Status ResidentExecutor::CheckSlots(
    absl::Span<const SlotId> slots) const {
  std::vector<bool> seen(slot_info_.size(), false);
  for (const SlotId& s : slots) {
    TWICE_RETURN_IF_ERROR(pool_.Check(s));
    if (slot_info_[s.index].damaged) {
      return absl::FailedPreconditionError(absl::StrCat(
          SlotIdName(s),
          " holds a state damaged by a failed device call; release it and "
          "read the document again"));
    }
    if (seen[s.index]) {
      return absl::InvalidArgumentError(
          absl::StrCat(SlotIdName(s), " appears twice in one call"));
    }
    seen[s.index] = true;
  }
  return absl::OkStatus();
}

absl::Status ResidentExecutor::Damaged(absl::Span<const SlotId> slots,
                                       const absl::Status& cause) {
  for (const SlotId& s : slots) slot_info_[s.index].damaged = true;
  // Always INTERNAL: the device's own code would mislead the caller
  // (RESOURCE_EXHAUSTED reads "nothing changed, make room and retry",
  // INVALID_ARGUMENT blames a request that passed every check).
  return absl::InternalError(absl::StrCat(
      "the device failed after the call's work began (its ", slots.size(),
      " state(s) are damaged; read the documents again): ",
      absl::StatusCodeToString(cause.code()), ": ", cause.message()));
}

absl::Status ResidentExecutor::ZeroSlot(int32_t slot) {
  for (const auto& b : blocks_) {
    TWICE_RETURN_IF_ERROR(b->mixer->ZeroSlot(*device_, slot));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotId> ResidentExecutor::NewSequence() {
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  TWICE_ASSIGN_OR_RETURN(SlotId id, pool_.Acquire());
  slot_info_[id.index] = SlotInfo{};
  kv_tables_.Free(id.index);
  if (absl::Status s = ZeroSlot(id.index); !s.ok()) {
    (void)pool_.Release(id);
    return s;
  }
  return id;
}

absl::StatusOr<SlotId> ResidentExecutor::Resume(const SequenceState& state) {
  if (state.fingerprint() != model_.description().fingerprint) {
    return absl::FailedPreconditionError(
        "ResidentExecutor: the state belongs to another model");
  }
  if (state.damaged()) {
    return absl::FailedPreconditionError(
        "ResidentExecutor: the state is damaged; read the document again");
  }
  if (state.num_layers() != static_cast<int>(blocks_.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("ResidentExecutor: the state has ", state.num_layers(),
                     " layers, the model ", blocks_.size()));
  }
  for (size_t l = 0; l < blocks_.size(); ++l) {
    absl::Status s = blocks_[l]->mixer->CheckState(
        state.layer(static_cast<int>(l)), state.token_count());
    if (!s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("ResidentExecutor: layer ", l, ": ", s.message()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  TWICE_ASSIGN_OR_RETURN(SlotId id, pool_.Acquire());
  slot_info_[id.index] = SlotInfo{};
  kv_tables_.Free(id.index);
  const SlotId one[] = {id};
  absl::Status s = ReserveKv(one, state.token_count());
  for (size_t l = 0; l < blocks_.size() && s.ok(); ++l) {
    s = blocks_[l]->mixer->Upload(*device_, state.layer(static_cast<int>(l)),
                                  id.index);
  }
  if (!s.ok()) {
    kv_tables_.Free(id.index);
    (void)pool_.Release(id);
    return s;
  }
  slot_info_[id.index] = SlotInfo{state.token_count(), false};
  return id;
}

absl::StatusOr<std::unique_ptr<SequenceState>> ResidentExecutor::Save(
    SlotId slot) {
  std::unique_ptr<SequenceState> state = model_.NewState();
  TWICE_RETURN_IF_ERROR(SaveInto(slot, *state));
  return state;
}

absl::Status ResidentExecutor::SaveInto(SlotId slot, SequenceState& state) {
  if (state.fingerprint() != model_.description().fingerprint ||
      state.num_layers() != static_cast<int>(blocks_.size())) {
    return absl::FailedPreconditionError(
        "ResidentExecutor: saving into a state of another model");
  }
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  const SlotId one[] = {slot};
  TWICE_RETURN_IF_ERROR(CheckSlots(one));
  const int64_t tokens = slot_info_[slot.index].tokens;
  for (size_t l = 0; l < blocks_.size(); ++l) {
    // The kind and shape only: the host layer's own count is overwritten.
    absl::Status s = blocks_[l]->mixer->CheckState(
        state.layer(static_cast<int>(l)), /*tokens=*/-1);
    if (!s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("ResidentExecutor: layer ", l, ": ", s.message()));
    }
  }
  std::vector<HostCopy> copies;
  for (size_t l = 0; l < blocks_.size(); ++l) {
    TWICE_RETURN_IF_ERROR(blocks_[l]->mixer->AddDownloads(
        slot.index, tokens, state.layer(static_cast<int>(l)), copies));
  }
  TWICE_RETURN_IF_ERROR(device_->CopyAllToHost(copies));
  state.set_token_count(tokens);
  return absl::OkStatus();
}

absl::Status ResidentExecutor::Release(SlotId slot) {
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(pool_.Release(slot));
  kv_tables_.Free(slot.index);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ResidentExecutor::TokenCount(SlotId slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(pool_.Check(slot));
  return slot_info_[slot.index].tokens;
}

absl::Status ResidentExecutor::step_graphs_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_graphs_.status();
}

int ResidentExecutor::step_graphs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_graphs_.graphs();
}

DeviceTraffic ResidentExecutor::traffic() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_->traffic();
}

bool ResidentExecutor::IsDamaged(SlotId slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.Check(slot).ok() && slot_info_[slot.index].damaged;
}

absl::Status ResidentExecutor::RunBlocks(const ResidentPass& pass) {
  ExecutorDevice& dev = *device_;
  const int64_t rows = pass.rows;
  const DeviceFloats x = x_->floats().sub(0, rows * dim_);
  const DeviceFloats h = h_->floats().sub(0, rows * dim_);
  const DeviceFloats scratch = scratch_->floats();
  for (const auto& b : blocks_) {
    const LayerInput mixer_in{
        x, rows, dim_, b->norm1_w->floats(), b->host->norm1.eps(), h};
    TWICE_RETURN_IF_ERROR(b->mixer->Forward(dev, pass, mixer_in, scratch, x));
    if (b->ffn == nullptr) continue;
    const LayerInput ffn_in{
        x, rows, dim_, b->norm2_w->floats(), b->host->norm2.eps(), h};
    TWICE_RETURN_IF_ERROR(b->ffn->Forward(dev, pass, ffn_in, scratch, x));
  }
  return absl::OkStatus();
}

absl::Status ResidentExecutor::Head(DeviceFloats x, int64_t rows,
                                    int64_t first_logits_row) {
  const DeviceMatrix& head = lm_head_ != nullptr ? *lm_head_ : *embedding_;
  const LinearOutput logits[] = {
      {&head,
       logits_->floats().sub(first_logits_row * vocab_rows_,
                             rows * vocab_rows_),
       LinearEpilogue{{}, /*accumulate=*/false, model_.logit_scale()}}};
  return device_->RmsNormLinears(x, rows, dim_, final_norm_->floats(),
                                 model_.final_norm().eps(),
                                 h_->floats().sub(0, rows * dim_), logits);
}

absl::Status ResidentExecutor::StepToLogits(absl::Span<const int32_t> tokens,
                                            absl::Span<const SlotId> slots,
                                            absl::Span<float> logits) {
  std::vector<int32_t> indices(slots.size());
  std::vector<int64_t> positions(slots.size());
  for (size_t b = 0; b < slots.size(); ++b) {
    indices[b] = slots[b].index;
    positions[b] = slot_info_[slots[b].index].tokens;
  }
  // The step's own inputs: failing to upload them leaves every state as
  // it was.
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceSlotMap> map,
                         device_->UploadSlotMap(indices, positions));
  TWICE_ASSIGN_OR_RETURN(PassTables kv_tables, PassKvTables(slots));
  const int64_t rows = static_cast<int64_t>(slots.size());
  ResidentPass pass{rows, {}, map.get()};
  pass.kv_tables = kv_tables.views;
  absl::Status s =
      device_->Embedding(tokens, *embedding_, model_.embedding_scale(),
                         x_->floats().sub(0, rows * dim_));
  if (s.ok()) s = RunBlocks(pass);
  if (s.ok()) s = Head(x_->floats().sub(0, rows * dim_), rows, 0);
  if (s.ok()) {
    s = device_->CopyToHost(logits_->floats().sub(0, rows * vocab_rows_),
                            logits);
  }
  return s.ok() ? s : Damaged(slots, s);
}

absl::Status ResidentExecutor::StepWork(
    DeviceStep& step, absl::Span<const DeviceBlockTable* const> kv_tables) {
  const int64_t rows = step.rows();
  ResidentPass pass{rows, {}, &step.slot_map()};
  pass.kv_tables = kv_tables;
  pass.first_pad_slot = options_.slots;  // pad slots follow the caller's
  TWICE_RETURN_IF_ERROR(device_->EmbedStep(step, *embedding_,
                                           model_.embedding_scale(),
                                           x_->floats().sub(0, rows * dim_)));
  TWICE_RETURN_IF_ERROR(RunBlocks(pass));
  TWICE_RETURN_IF_ERROR(Head(x_->floats().sub(0, rows * dim_), rows, 0));
  return device_->SampleStep(logits_->floats().sub(0, rows * vocab_rows_),
                             vocab_rows_, model_.description().vocab_size,
                             step);
}

int64_t ResidentExecutor::PaddedStepRows(int64_t batch) const {
  using Padding = ResidentExecutorOptions::StepPadding;
  // kWhileRecording stops padding once recording is off for good.
  const bool pad =
      pad_slots_ > 0 &&
      (options_.step_padding == Padding::kAlways || step_graphs_.status().ok());
  return pad ? StepBucketRows(batch, options_.slots) : batch;
}

absl::StatusOr<std::vector<int32_t>> ResidentExecutor::Step(
    absl::Span<const int32_t> tokens, absl::Span<const SlotId> slots,
    absl::Span<const kernels::SamplingRule> rules) {
  if (tokens.size() != slots.size() || rules.size() != slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResidentExecutor::Step: ", tokens.size(), " tokens, ", slots.size(),
        " slots and ", rules.size(), " rules; need one of each per sequence"));
  }
  for (const kernels::SamplingRule& r : rules) {
    TWICE_RETURN_IF_ERROR(kernels::ValidateSamplingRule(r));
  }
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, model_.description().vocab_size));
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  if (static_cast<int64_t>(slots.size()) > options_.slots) {
    return absl::InvalidArgumentError("ResidentExecutor::Step: too many rows");
  }
  TWICE_RETURN_IF_ERROR(CheckSlots(slots));
  TWICE_RETURN_IF_ERROR(ReserveKv(slots, 1));
  absl::Cleanup unreserve = [&] { ReturnUnreadKv(slots); };
  const int64_t batch = static_cast<int64_t>(slots.size());
  // Padding rows (if any) read token 0 at position 0 into pad slots of
  // their own, greedily; their ids are dropped.
  const int64_t rows = PaddedStepRows(batch);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  std::vector<int32_t> all_tokens(tokens.begin(), tokens.end());
  std::vector<kernels::SamplingRule> all_rules(rules.begin(), rules.end());
  std::vector<int32_t> indices(static_cast<size_t>(rows));
  std::vector<int64_t> positions(static_cast<size_t>(rows), 0);
  all_tokens.resize(static_cast<size_t>(rows), 0);
  all_rules.resize(static_cast<size_t>(rows), kernels::SamplingRule{});
  for (int64_t r = 0; r < rows; ++r) {
    if (r < batch) {
      indices[r] = slots[r].index;
      positions[r] = slot_info_[slots[r].index].tokens;
    } else {
      indices[r] = options_.slots + static_cast<int32_t>(r - batch);
    }
  }
  TWICE_ASSIGN_OR_RETURN(DeviceStep * step,
                         step_graphs_.StepFor(*device_, rows));
  absl::StatusOr<std::vector<const DeviceBlockTable*>> kv_tables =
      step_graphs_.FillTables(*device_, rows, kv_tables_.Rows(indices));
  // The step's inputs and tables are the step's own: failing to fill them
  // leaves every state as it was.
  TWICE_RETURN_IF_ERROR(kv_tables.status());
  TWICE_RETURN_IF_ERROR(
      device_->FillStep(*step, all_tokens, indices, positions, all_rules));
  absl::Status s = step_graphs_.Run(
      *device_, rows, [&] { return StepWork(*step, *kv_tables); });
  if (s.ok()) s = device_->CopyStepIds(*step, absl::MakeSpan(ids));
  if (!s.ok()) return Damaged(slots, s);
  std::move(unreserve).Cancel();
  for (const SlotId& slot : slots) ++slot_info_[slot.index].tokens;
  ids.resize(static_cast<size_t>(batch));
  return ids;
}

absl::StatusOr<std::vector<float>> ResidentExecutor::StepLogits(
    absl::Span<const int32_t> tokens, absl::Span<const SlotId> slots) {
  if (tokens.size() != slots.size()) {
    return absl::InvalidArgumentError(
        "ResidentExecutor::StepLogits: need one token per slot");
  }
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, model_.description().vocab_size));
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  if (static_cast<int64_t>(slots.size()) > options_.slots) {
    return absl::InvalidArgumentError(
        "ResidentExecutor::StepLogits: too many rows");
  }
  TWICE_RETURN_IF_ERROR(CheckSlots(slots));
  TWICE_RETURN_IF_ERROR(ReserveKv(slots, 1));
  absl::Cleanup unreserve = [&] { ReturnUnreadKv(slots); };
  const int64_t batch = static_cast<int64_t>(slots.size());
  std::vector<float> logits(static_cast<size_t>(batch * vocab_rows_));
  TWICE_RETURN_IF_ERROR(StepToLogits(tokens, slots, absl::MakeSpan(logits)));
  std::move(unreserve).Cancel();
  for (const SlotId& slot : slots) ++slot_info_[slot.index].tokens;
  return logits;
}

}  // namespace twice::engine
