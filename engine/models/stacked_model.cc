#include "engine/models/stacked_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/snapshot_state.h"
#include "engine/state/state_io.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_convert.h"

namespace twice::engine {
namespace {

// Tokens per block-by-block pass: bounds activation memory (the FFN holds
// [chunk, F] floats) without changing results.
constexpr int64_t kPrefillChunk = 512;

// Everything needed to return a state to its value before a failed read:
// per layer a cheap snapshot where the state offers one (the growing KV
// states), else its serialized bytes (the small fixed-size window ring).
class Undo {
 public:
  explicit Undo(const SequenceState& s) : token_count_(s.token_count()) {
    for (int l = 0; l < s.num_layers(); ++l) {
      const LayerState& layer = s.layer(l);
      if (const auto* snap = dynamic_cast<const SnapshotState*>(&layer)) {
        snapshots_.push_back(snap->TakeSnapshot());
        bytes_.emplace_back();
      } else {
        snapshots_.push_back(nullptr);
        std::string b;
        StateWriter w(&b);
        layer.Serialize(w);
        bytes_.push_back(std::move(b));
      }
    }
  }
  void Restore(SequenceState& s) const {
    s.set_token_count(token_count_);
    for (int l = 0; l < s.num_layers(); ++l) {
      if (snapshots_[l] != nullptr) {
        dynamic_cast<SnapshotState&>(s.layer(l))
            .RestoreSnapshot(*snapshots_[l]);
      } else {
        StateReader r(bytes_[l]);
        // The bytes were written by this very layer; reading them back
        // cannot fail short of memory corruption.
        (void)s.layer(l).Deserialize(r);
      }
    }
  }

 private:
  int64_t token_count_;
  std::vector<std::unique_ptr<StateSnapshot>> snapshots_;
  std::vector<std::string> bytes_;
};

}  // namespace

absl::Status StackedModel::Finish(Parts p) {
  if (p.tokenizer->vocab_size() > p.vocab_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json has ", p.tokenizer->vocab_size(),
        " tokens, more than the model's ", p.vocab_rows, " embedding rows"));
  }
  ModelDescription& desc = description_;
  desc.architecture = std::move(p.architecture);
  desc.fingerprint = std::move(p.fingerprint);
  desc.vocab_size = p.tokenizer->vocab_size();
  desc.padded_vocab_size = static_cast<int32_t>(p.vocab_rows);
  desc.eos_token_id = static_cast<int32_t>(p.eos_token_id);
  if (desc.eos_token_id < 0) {
    desc.eos_token_id = p.tokenizer->TokenToId("</s>").value_or(
        p.tokenizer->TokenToId("<|endoftext|>").value_or(-1));
  }
  if (desc.eos_token_id >= desc.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: eos_token_id ", desc.eos_token_id,
        " is outside the tokenizer vocabulary of ", desc.vocab_size));
  }
  desc.training_context = p.training_context;
  desc.num_layers = static_cast<int>(p.blocks.size());
  desc.hidden_size = static_cast<int>(p.hidden_size);
  d_ = p.hidden_size;
  weights_ = std::move(p.weights);
  tokenizer_ = std::move(p.tokenizer);
  embedding_ = std::move(p.embedding);
  lm_head_ = std::move(p.lm_head);
  blocks_ = std::move(p.blocks);
  final_norm_ = std::move(p.final_norm);
  return absl::OkStatus();
}

std::unique_ptr<SequenceState> StackedModel::NewState() const {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(blocks_.size());
  for (const Block& b : blocks_) layers.push_back(b.mixer->NewState());
  return std::make_unique<SequenceState>(description_.fingerprint,
                                         std::move(layers));
}

absl::Status StackedModel::CheckTokens(absl::Span<const int32_t> tokens) const {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to read");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= description_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", tokens[i], " at index ", i,
          " is outside the vocabulary [0, ", description_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status StackedModel::CheckState(const SequenceState& state) const {
  if (state.fingerprint() != description_.fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat("state belongs to model ", state.fingerprint(),
                     ", not to ", description_.fingerprint));
  }
  if (state.num_layers() != static_cast<int>(blocks_.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("state has ", state.num_layers(), " layers, the model ",
                     blocks_.size()));
  }
  return absl::OkStatus();
}

absl::Status StackedModel::ForwardChunk(absl::Span<const int32_t> tokens,
                                        SequenceState& state,
                                        std::vector<float>& x) const {
  const int64_t d = d_;
  const int64_t t = static_cast<int64_t>(tokens.size());
  x.resize(t * d);
  for (int64_t i = 0; i < t; ++i) {
    kernels::RowToF32(embedding_, tokens[i], x.data() + i * d);
  }
  std::vector<float> h(t * d), y(t * d);
  const int64_t start = state.token_count();
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    TWICE_RETURN_IF_ERROR(b.norm1.Forward(x, t, absl::MakeSpan(h)));
    TWICE_RETURN_IF_ERROR(b.mixer->Forward(
        h, t, start, state.layer(static_cast<int>(l)), absl::MakeSpan(y)));
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
    TWICE_RETURN_IF_ERROR(b.norm2.Forward(x, t, absl::MakeSpan(h)));
    TWICE_RETURN_IF_ERROR(b.ffn->Forward(h, t, absl::MakeSpan(y)));
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
  }
  state.set_token_count(start + t);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> StackedModel::Prefill(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (IsPrefixMode(mode)) {
    return absl::UnimplementedError(absl::StrCat(
        "this ", description_.architecture,
        " model has no prefix encoder; prefix encoding needs a JRT-RNN model"));
  }
  TWICE_RETURN_IF_ERROR(CheckTokens(tokens));
  TWICE_RETURN_IF_ERROR(CheckState(state));
  // `state` must be unchanged unless everything succeeds. A copy would cost
  // O(T) per decode step for the growing KV states, so undo instead.
  const Undo undo(state);
  std::vector<float> x;
  for (size_t begin = 0; begin < tokens.size(); begin += kPrefillChunk) {
    const size_t n = std::min<size_t>(kPrefillChunk, tokens.size() - begin);
    if (absl::Status s = ForwardChunk(tokens.subspan(begin, n), state, x);
        !s.ok()) {
      undo.Restore(state);
      return s;
    }
  }
  // Only the last position is projected to logits.
  const int64_t last = static_cast<int64_t>(x.size()) / d_ - 1;
  std::vector<float> h(d_);
  if (absl::Status s = final_norm_.Forward(
          absl::MakeConstSpan(x).subspan(last * d_, d_), 1, absl::MakeSpan(h));
      !s.ok()) {
    undo.Restore(state);
    return s;
  }
  std::vector<float> logits(description_.padded_vocab_size);
  if (absl::Status s =
          kernels::Linear(h, 1, d_, lm_head_, description_.padded_vocab_size,
                          {}, absl::MakeSpan(logits));
      !s.ok()) {
    undo.Restore(state);
    return s;
  }
  return logits;
}

absl::StatusOr<std::vector<float>> StackedModel::Step(
    int32_t token, SequenceState& state) const {
  SequenceState* states[] = {&state};
  return StepBatch(absl::MakeConstSpan(&token, 1), states);
}

absl::StatusOr<std::vector<float>> StackedModel::StepBatch(
    absl::Span<const int32_t> tokens,
    absl::Span<SequenceState* const> states) const {
  TWICE_RETURN_IF_ERROR(CheckStepBatchShape(tokens, states));
  TWICE_RETURN_IF_ERROR(CheckTokens(tokens));
  for (const SequenceState* state : states) {
    TWICE_RETURN_IF_ERROR(CheckState(*state));
  }
  const int64_t d = d_;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  std::vector<Undo> undo;
  std::vector<int64_t> positions;
  for (const SequenceState* state : states) {
    undo.emplace_back(*state);
    positions.push_back(state->token_count());
  }
  auto fail = [&](absl::Status s) {
    for (int64_t b = 0; b < rows; ++b) undo[b].Restore(*states[b]);
    return s;
  };
  std::vector<float> x(rows * d), h(rows * d), y(rows * d);
  for (int64_t b = 0; b < rows; ++b) {
    kernels::RowToF32(embedding_, tokens[b], x.data() + b * d);
  }
  std::vector<LayerState*> layer_states(rows);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& blk = blocks_[l];
    for (int64_t b = 0; b < rows; ++b) {
      layer_states[b] = &states[b]->layer(static_cast<int>(l));
    }
    absl::Status s = blk.norm1.Forward(x, rows, absl::MakeSpan(h));
    if (s.ok()) {
      s = blk.mixer->StepBatch(h, layer_states, positions, absl::MakeSpan(y));
    }
    if (!s.ok()) return fail(s);
    for (int64_t i = 0; i < rows * d; ++i) x[i] += y[i];
    s = blk.norm2.Forward(x, rows, absl::MakeSpan(h));
    if (s.ok()) s = blk.ffn->Forward(h, rows, absl::MakeSpan(y));
    if (!s.ok()) return fail(s);
    for (int64_t i = 0; i < rows * d; ++i) x[i] += y[i];
  }
  std::vector<float> logits(rows * description_.padded_vocab_size);
  absl::Status s = final_norm_.Forward(x, rows, absl::MakeSpan(h));
  if (s.ok()) {
    s = kernels::Linear(h, rows, d, lm_head_, description_.padded_vocab_size,
                        {}, absl::MakeSpan(logits));
  }
  if (!s.ok()) return fail(s);
  for (int64_t b = 0; b < rows; ++b) {
    states[b]->set_token_count(positions[b] + 1);
  }
  return logits;
}

}  // namespace twice::engine
