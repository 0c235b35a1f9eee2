#include "engine/executor/mamba2_executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/mamba2_state.h"
#include "engine/models/state_checks.h"
#include "kernels/status_macros.h"

namespace twice::engine {

// One layer's parameters and state arrays on the device.
struct Mamba2Executor::Layer {
  const Mamba2Model::LayerParameters* params = nullptr;
  std::unique_ptr<DeviceArray> norm_w, conv_w, conv_b, dt_bias, a, d, gate_w;
  std::unique_ptr<DeviceMatrix> in_proj, out_proj;
  std::unique_ptr<DeviceArray> conv_tail;  // [slots, (K-1)·conv_dim]
  std::unique_ptr<DeviceArray> ssm;        // [slots, H·P·N]
  int64_t tail_floats = 0;                 // per slot
  int64_t ssm_floats = 0;                  // per slot

  DeviceFloats tail_of(int32_t slot) const {
    return conv_tail->floats().sub(slot * tail_floats, tail_floats);
  }
  DeviceFloats ssm_of(int32_t slot) const {
    return ssm->floats().sub(slot * ssm_floats, ssm_floats);
  }
};

namespace {

absl::StatusOr<std::unique_ptr<DeviceArray>> UploadVector(
    ExecutorDevice& device, absl::Span<const float> values) {
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceArray> array,
                         device.Allocate(static_cast<int64_t>(values.size())));
  TWICE_RETURN_IF_ERROR(device.CopyToDevice(values, array->floats()));
  return array;
}

}  // namespace

Mamba2Executor::Mamba2Executor(const Mamba2Model& model,
                               std::unique_ptr<ExecutorDevice> device,
                               const Mamba2ExecutorOptions& options)
    : model_(model),
      params_(model.parameters()),
      device_(std::move(device)),
      options_(options),
      dim_(model.description().hidden_size),
      vocab_rows_(model.description().padded_vocab_size),
      rows_(std::max<int64_t>(options.prefill_chunk, options.slots)),
      pool_(options.slots),
      slot_info_(static_cast<size_t>(options.slots)) {}

Mamba2Executor::~Mamba2Executor() = default;

absl::StatusOr<std::unique_ptr<Mamba2Executor>> Mamba2Executor::Create(
    const Mamba2Model& model, std::unique_ptr<ExecutorDevice> device,
    const Mamba2ExecutorOptions& options) {
  if (device == nullptr) {
    return absl::InvalidArgumentError("Mamba2Executor: no device");
  }
  if (options.slots < 1 || options.slots > 65536 || options.prefill_chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mamba2Executor: need 1 <= slots <= 65536 and prefill_chunk >= 1, got "
        "slots ",
        options.slots, ", prefill_chunk ", options.prefill_chunk));
  }
  std::unique_ptr<Mamba2Executor> e(
      new Mamba2Executor(model, std::move(device), options));
  TWICE_RETURN_IF_ERROR(e->Load());
  return e;
}

absl::Status Mamba2Executor::Load() {
  ExecutorDevice& dev = *device_;
  if (params_.layers.empty()) {
    return absl::InvalidArgumentError(
        "Mamba2Executor: the model has no layers");
  }
  TWICE_ASSIGN_OR_RETURN(embedding_, dev.UploadMatrix(params_.embedding));
  // A tied head is the embedding's buffer: one device copy serves both.
  if (params_.lm_head.raw_data() != params_.embedding.raw_data()) {
    TWICE_ASSIGN_OR_RETURN(lm_head_, dev.UploadMatrix(params_.lm_head));
  }
  TWICE_ASSIGN_OR_RETURN(final_norm_,
                         UploadVector(dev, params_.final_norm.weight().span()));
  const int64_t slots = options_.slots;
  for (const Mamba2Model::LayerParameters& lp : params_.layers) {
    const Mamba2Mixer::Parameters& m = lp.mixer;
    auto layer = std::make_unique<Layer>();
    layer->params = &lp;
    TWICE_ASSIGN_OR_RETURN(layer->norm_w,
                           UploadVector(dev, lp.norm.weight().span()));
    TWICE_ASSIGN_OR_RETURN(layer->conv_w, UploadVector(dev, m.conv_w.span()));
    TWICE_ASSIGN_OR_RETURN(layer->conv_b, UploadVector(dev, m.conv_b.span()));
    TWICE_ASSIGN_OR_RETURN(layer->dt_bias, UploadVector(dev, m.dt_bias.span()));
    TWICE_ASSIGN_OR_RETURN(layer->a, UploadVector(dev, m.a));
    TWICE_ASSIGN_OR_RETURN(layer->d, UploadVector(dev, m.d.span()));
    TWICE_ASSIGN_OR_RETURN(layer->gate_w, UploadVector(dev, m.norm_w.span()));
    TWICE_ASSIGN_OR_RETURN(layer->in_proj, dev.UploadMatrix(m.in_proj));
    TWICE_ASSIGN_OR_RETURN(layer->out_proj, dev.UploadMatrix(m.out_proj));
    layer->tail_floats = (m.shape.conv_kernel - 1) * m.shape.conv_dim;
    layer->ssm_floats = m.shape.heads * m.shape.head_dim * m.shape.state_dim;
    TWICE_ASSIGN_OR_RETURN(layer->conv_tail,
                           dev.Allocate(slots * layer->tail_floats));
    TWICE_ASSIGN_OR_RETURN(layer->ssm, dev.Allocate(slots * layer->ssm_floats));
    layers_.push_back(std::move(layer));
  }
  // Workspace, sized once for the largest pass.
  const Mamba2Mixer::Parameters& m0 = params_.layers.front().mixer;
  const int64_t in_dim = layers_.front()->in_proj->rows();
  TWICE_ASSIGN_OR_RETURN(x_, dev.Allocate(rows_ * dim_));
  TWICE_ASSIGN_OR_RETURN(h_, dev.Allocate(rows_ * dim_));
  TWICE_ASSIGN_OR_RETURN(out_, dev.Allocate(rows_ * dim_));
  TWICE_ASSIGN_OR_RETURN(zxbcdt_, dev.Allocate(rows_ * in_dim));
  TWICE_ASSIGN_OR_RETURN(conv_, dev.Allocate(rows_ * m0.shape.conv_dim));
  TWICE_ASSIGN_OR_RETURN(delta_, dev.Allocate(rows_ * m0.shape.heads));
  TWICE_ASSIGN_OR_RETURN(y_, dev.Allocate(rows_ * m0.inner));
  TWICE_ASSIGN_OR_RETURN(logits_, dev.Allocate(options_.slots * vocab_rows_));
  weight_bytes_ = embedding_->bytes() +
                  (lm_head_ != nullptr ? lm_head_->bytes() : 0) +
                  final_norm_->floats().size * int64_t{sizeof(float)};
  for (const auto& l : layers_) {
    weight_bytes_ += l->in_proj->bytes() + l->out_proj->bytes();
    for (const auto* v : {&l->norm_w, &l->conv_w, &l->conv_b, &l->dt_bias,
                          &l->a, &l->d, &l->gate_w}) {
      weight_bytes_ += (*v)->floats().size * int64_t{sizeof(float)};
    }
  }
  return dev.Synchronize();
}

int64_t Mamba2Executor::state_bytes_per_slot() const {
  int64_t floats = 0;
  for (const auto& l : layers_) floats += l->tail_floats + l->ssm_floats;
  return floats * static_cast<int64_t>(sizeof(float));
}

absl::Status Mamba2Executor::CheckSlots(absl::Span<const SlotId> slots) const {
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
          absl::StrCat(SlotIdName(s), " appears twice in one step"));
    }
    seen[s.index] = true;
  }
  return absl::OkStatus();
}

void Mamba2Executor::MarkDamaged(absl::Span<const SlotId> slots) {
  for (const SlotId& s : slots) slot_info_[s.index].damaged = true;
}

absl::Status Mamba2Executor::ZeroSlot(int32_t slot) {
  for (const auto& l : layers_) {
    TWICE_RETURN_IF_ERROR(device_->Zero(l->tail_of(slot)));
    TWICE_RETURN_IF_ERROR(device_->Zero(l->ssm_of(slot)));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotId> Mamba2Executor::NewSequence() {
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_ASSIGN_OR_RETURN(SlotId id, pool_.Acquire());
  slot_info_[id.index] = SlotInfo{};
  if (absl::Status s = ZeroSlot(id.index); !s.ok()) {
    (void)pool_.Release(id);
    return s;
  }
  return id;
}

absl::StatusOr<SlotId> Mamba2Executor::Resume(const SequenceState& state) {
  if (state.fingerprint() != model_.description().fingerprint) {
    return absl::FailedPreconditionError(
        "Mamba2Executor: the state belongs to another model");
  }
  if (state.damaged()) {
    return absl::FailedPreconditionError(
        "Mamba2Executor: the state is damaged; read the document again");
  }
  if (state.num_layers() != static_cast<int>(layers_.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("Mamba2Executor: the state has ", state.num_layers(),
                     " layers, the model ", layers_.size()));
  }
  std::vector<const Mamba2State*> parts(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    parts[l] =
        dynamic_cast<const Mamba2State*>(&state.layer(static_cast<int>(l)));
    if (parts[l] == nullptr ||
        !(parts[l]->shape() == layers_[l]->params->mixer.shape)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Mamba2Executor: layer ", l, " is not a matching mamba2 state"));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_ASSIGN_OR_RETURN(SlotId id, pool_.Acquire());
  absl::Status s;
  for (size_t l = 0; l < layers_.size() && s.ok(); ++l) {
    s = device_->CopyToDevice(parts[l]->conv_tail(),
                              layers_[l]->tail_of(id.index));
    if (s.ok()) {
      s = device_->CopyToDevice(parts[l]->ssm(), layers_[l]->ssm_of(id.index));
    }
  }
  if (!s.ok()) {
    (void)pool_.Release(id);
    return s;
  }
  slot_info_[id.index] = SlotInfo{state.token_count(), false};
  return id;
}

absl::StatusOr<std::unique_ptr<SequenceState>> Mamba2Executor::Save(
    SlotId slot) {
  std::unique_ptr<SequenceState> state = model_.NewState();
  TWICE_RETURN_IF_ERROR(SaveInto(slot, *state));
  return state;
}

absl::Status Mamba2Executor::SaveInto(SlotId slot, SequenceState& state) {
  if (state.fingerprint() != model_.description().fingerprint ||
      state.num_layers() != static_cast<int>(layers_.size())) {
    return absl::FailedPreconditionError(
        "Mamba2Executor: saving into a state of another model");
  }
  std::vector<Mamba2State*> parts(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    parts[l] = dynamic_cast<Mamba2State*>(&state.layer(static_cast<int>(l)));
    if (parts[l] == nullptr ||
        !(parts[l]->shape() == layers_[l]->params->mixer.shape)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Mamba2Executor: layer ", l, " is not a matching mamba2 state"));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  const SlotId one[] = {slot};
  TWICE_RETURN_IF_ERROR(CheckSlots(one));
  for (size_t l = 0; l < layers_.size(); ++l) {
    TWICE_RETURN_IF_ERROR(device_->CopyToHost(layers_[l]->tail_of(slot.index),
                                              parts[l]->conv_tail()));
    TWICE_RETURN_IF_ERROR(
        device_->CopyToHost(layers_[l]->ssm_of(slot.index), parts[l]->ssm()));
  }
  state.set_token_count(slot_info_[slot.index].tokens);
  return absl::OkStatus();
}

absl::Status Mamba2Executor::Release(SlotId slot) {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.Release(slot);
}

absl::StatusOr<int64_t> Mamba2Executor::TokenCount(SlotId slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(pool_.Check(slot));
  return slot_info_[slot.index].tokens;
}

DeviceTraffic Mamba2Executor::traffic() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_->traffic();
}

bool Mamba2Executor::IsDamaged(SlotId slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.Check(slot).ok() && slot_info_[slot.index].damaged;
}

absl::Status Mamba2Executor::RunLayer(const Layer& layer, const Pass& pass) {
  ExecutorDevice& dev = *device_;
  const Mamba2Mixer::Parameters& m = layer.params->mixer;
  const Mamba2StateShape& shape = m.shape;
  const int64_t rows = pass.rows;
  const int64_t in_dim = layer.in_proj->rows();
  const int64_t c = shape.conv_dim;
  const int64_t e = m.inner;
  const int64_t h = shape.heads;
  const int64_t gn = m.groups * shape.state_dim;
  const DeviceFloats x = x_->floats().sub(0, rows * dim_);
  const DeviceFloats hn = h_->floats().sub(0, rows * dim_);
  const DeviceFloats zx = zxbcdt_->floats().sub(0, rows * in_dim);
  const DeviceFloats conv = conv_->floats().sub(0, rows * c);
  const DeviceFloats delta = delta_->floats().sub(0, rows * h);
  const DeviceFloats y = y_->floats().sub(0, rows * e);
  const DeviceFloats out = out_->floats().sub(0, rows * dim_);
  // Column blocks of in_proj's output (z | xBC | dt) and of the conv
  // output (x | B | C), as strided views of rows.
  const DeviceFloats xbc_in = zx.sub(e, (rows - 1) * in_dim + c);
  const DeviceFloats dt_in = zx.sub(e + c, (rows - 1) * in_dim + h);
  const DeviceFloats conv_x = conv.sub(0, (rows - 1) * c + e);
  const DeviceFloats conv_b = conv.sub(e, (rows - 1) * c + gn);
  const DeviceFloats conv_c = conv.sub(e + gn, (rows - 1) * c + gn);
  const kernels::SsdShape ssd{h, shape.head_dim, m.groups, shape.state_dim};

  TWICE_RETURN_IF_ERROR(dev.RmsNorm(x, rows, dim_, layer.norm_w->floats(),
                                    layer.params->norm.eps(), hn));
  TWICE_RETURN_IF_ERROR(dev.Linear(hn, rows, *layer.in_proj, zx));
  if (pass.step != nullptr) {
    TWICE_RETURN_IF_ERROR(dev.CausalConv1dStepSlots(
        xbc_in, c, in_dim, layer.conv_w->floats(), shape.conv_kernel,
        layer.conv_tail->floats(), *pass.step, conv));
  } else {
    TWICE_RETURN_IF_ERROR(dev.CausalConv1d(
        xbc_in, rows, c, in_dim, layer.conv_w->floats(), shape.conv_kernel,
        layer.tail_of(pass.prefill_slot), conv));
  }
  TWICE_RETURN_IF_ERROR(dev.BiasSiluRows(conv, rows, layer.conv_b->floats()));
  TWICE_RETURN_IF_ERROR(dev.SoftplusBiasRows(dt_in, rows, in_dim,
                                             layer.dt_bias->floats(), delta));
  if (pass.step != nullptr) {
    TWICE_RETURN_IF_ERROR(dev.SsdStepSlots(
        ssd, conv_x, c, conv_b, conv_c, c, delta, layer.a->floats(),
        layer.d->floats(), layer.ssm->floats(), *pass.step, y));
  } else {
    TWICE_RETURN_IF_ERROR(dev.SsdChunkScan(ssd, rows, m.chunk, conv_x, c,
                                           conv_b, conv_c, c, delta,
                                           layer.a->floats(), layer.d->floats(),
                                           layer.ssm_of(pass.prefill_slot), y));
  }
  TWICE_RETURN_IF_ERROR(dev.GatedGroupRmsNorm(zx, in_dim, y, rows, e, m.groups,
                                              layer.gate_w->floats(),
                                              m.gated_norm_eps, y));
  TWICE_RETURN_IF_ERROR(dev.Linear(y, rows, *layer.out_proj, out));
  return dev.AddInPlace(x, out);
}

absl::Status Mamba2Executor::RunLayers(absl::Span<const int32_t> ids,
                                       const Pass& pass) {
  TWICE_RETURN_IF_ERROR(device_->Embedding(
      ids, *embedding_, x_->floats().sub(0, pass.rows * dim_)));
  for (const auto& layer : layers_) {
    TWICE_RETURN_IF_ERROR(RunLayer(*layer, pass));
  }
  return absl::OkStatus();
}

absl::Status Mamba2Executor::Head(int64_t first, int64_t rows) {
  const DeviceFloats hn = h_->floats().sub(0, rows * dim_);
  TWICE_RETURN_IF_ERROR(
      device_->RmsNorm(x_->floats().sub(first * dim_, rows * dim_), rows, dim_,
                       final_norm_->floats(), params_.final_norm.eps(), hn));
  const DeviceMatrix& head = lm_head_ != nullptr ? *lm_head_ : *embedding_;
  return device_->Linear(hn, rows, head,
                         logits_->floats().sub(0, rows * vocab_rows_));
}

absl::StatusOr<std::vector<float>> Mamba2Executor::Prefill(
    SlotId slot, absl::Span<const int32_t> tokens) {
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, model_.description().vocab_size));
  std::lock_guard<std::mutex> lock(mu_);
  const SlotId one[] = {slot};
  TWICE_RETURN_IF_ERROR(CheckSlots(one));
  const int64_t total = static_cast<int64_t>(tokens.size());
  absl::Status s;
  int64_t last_rows = 0;
  for (int64_t begin = 0; begin < total && s.ok();
       begin += options_.prefill_chunk) {
    last_rows = std::min(options_.prefill_chunk, total - begin);
    s = RunLayers(tokens.subspan(begin, last_rows),
                  Pass{last_rows, slot.index, nullptr});
  }
  std::vector<float> logits(static_cast<size_t>(vocab_rows_));
  if (s.ok()) s = Head(last_rows - 1, 1);
  if (s.ok()) {
    s = device_->CopyToHost(logits_->floats().sub(0, vocab_rows_),
                            absl::MakeSpan(logits));
  }
  if (!s.ok()) {
    MarkDamaged(one);
    return s;
  }
  slot_info_[slot.index].tokens += total;
  return logits;
}

absl::Status Mamba2Executor::StepToLogits(absl::Span<const int32_t> tokens,
                                          absl::Span<const SlotId> slots) {
  std::vector<int32_t> indices(slots.size());
  for (size_t b = 0; b < slots.size(); ++b) indices[b] = slots[b].index;
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceSlotMap> map,
                         device_->UploadSlotMap(indices));
  const int64_t rows = static_cast<int64_t>(slots.size());
  TWICE_RETURN_IF_ERROR(RunLayers(tokens, Pass{rows, -1, map.get()}));
  return Head(0, rows);
}

absl::StatusOr<std::vector<int32_t>> Mamba2Executor::Step(
    absl::Span<const int32_t> tokens, absl::Span<const SlotId> slots,
    absl::Span<const kernels::SamplingRule> rules) {
  if (tokens.size() != slots.size() || rules.size() != slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mamba2Executor::Step: ", tokens.size(), " tokens, ", slots.size(),
        " slots and ", rules.size(), " rules; need one of each per sequence"));
  }
  for (const kernels::SamplingRule& r : rules) {
    TWICE_RETURN_IF_ERROR(kernels::ValidateSamplingRule(r));
  }
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, model_.description().vocab_size));
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(slots.size()) > options_.slots) {
    return absl::InvalidArgumentError("Mamba2Executor::Step: too many rows");
  }
  TWICE_RETURN_IF_ERROR(CheckSlots(slots));
  const int64_t batch = static_cast<int64_t>(slots.size());
  std::vector<int32_t> ids(static_cast<size_t>(batch));
  absl::Status s = StepToLogits(tokens, slots);
  if (s.ok()) {
    s = device_->SampleRows(logits_->floats().sub(0, batch * vocab_rows_),
                            batch, vocab_rows_, model_.description().vocab_size,
                            rules, absl::MakeSpan(ids));
  }
  if (!s.ok()) {
    MarkDamaged(slots);
    return s;
  }
  for (const SlotId& slot : slots) ++slot_info_[slot.index].tokens;
  return ids;
}

absl::StatusOr<std::vector<float>> Mamba2Executor::StepLogits(
    absl::Span<const int32_t> tokens, absl::Span<const SlotId> slots) {
  if (tokens.size() != slots.size()) {
    return absl::InvalidArgumentError(
        "Mamba2Executor::StepLogits: need one token per slot");
  }
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, model_.description().vocab_size));
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(slots.size()) > options_.slots) {
    return absl::InvalidArgumentError(
        "Mamba2Executor::StepLogits: too many rows");
  }
  TWICE_RETURN_IF_ERROR(CheckSlots(slots));
  const int64_t batch = static_cast<int64_t>(slots.size());
  std::vector<float> logits(static_cast<size_t>(batch * vocab_rows_));
  absl::Status s = StepToLogits(tokens, slots);
  if (s.ok()) {
    s = device_->CopyToHost(logits_->floats().sub(0, batch * vocab_rows_),
                            absl::MakeSpan(logits));
  }
  if (!s.ok()) {
    MarkDamaged(slots);
    return s;
  }
  for (const SlotId& slot : slots) ++slot_info_[slot.index].tokens;
  return logits;
}

}  // namespace twice::engine
