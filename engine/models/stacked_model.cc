#include "engine/models/stacked_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/models/state_checks.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_convert.h"

namespace twice::engine {

absl::Status StackedModel::LoadEmbeddingAndHead(
    const WeightMap& w, const std::string& embedding_name,
    const std::string& head_name, bool tied, const Shape& shape, Parts& parts) {
  const std::string& stored_as =
      w.Has(embedding_name) || !w.Has(head_name) ? embedding_name : head_name;
  TWICE_ASSIGN_OR_RETURN(parts.embedding, w.GetMatrix(stored_as, shape));
  if (!tied) {
    TWICE_ASSIGN_OR_RETURN(parts.lm_head, w.GetMatrix(head_name, shape));
    return absl::OkStatus();
  }
  parts.lm_head = parts.embedding;  // one buffer
  return w.Has(head_name) ? w.Check(head_name, shape) : absl::OkStatus();
}

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
  if (p.prefix_length > 0 &&
      (p.prefix_pad_token_id < 0 || p.prefix_pad_token_id >= desc.vocab_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: prefix_pad_token_id ", p.prefix_pad_token_id,
        " is outside the tokenizer vocabulary of ", desc.vocab_size));
  }
  desc.prefix_length = p.prefix_length;
  desc.training_context = p.training_context;
  desc.num_layers = static_cast<int>(p.blocks.size());
  desc.hidden_size = static_cast<int>(p.hidden_size);
  d_ = p.hidden_size;
  prefill_chunk_ = std::max<int64_t>(1, p.prefill_chunk);
  prefix_pad_token_id_ = p.prefix_pad_token_id;
  embedding_scale_ = p.embedding_scale;
  residual_scale_ = p.residual_scale;
  logit_scale_ = p.logit_scale;
  weights_ = std::move(p.weights);
  tokenizer_ = std::move(p.tokenizer);
  embedding_ = std::move(p.embedding);
  lm_head_ = std::move(p.lm_head);
  blocks_ = std::move(p.blocks);
  for (const Block& b : blocks_) mixers_.push_back(b.mixer.get());
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

void StackedModel::Embed(absl::Span<const int32_t> tokens,
                         std::vector<float>& x) const {
  const int64_t d = d_;
  const int64_t t = static_cast<int64_t>(tokens.size());
  x.resize(t * d);
  for (int64_t i = 0; i < t; ++i) {
    kernels::RowToF32(embedding_, tokens[i], x.data() + i * d);
  }
  if (embedding_scale_ != 1.0f) {
    for (float& v : x) v *= embedding_scale_;
  }
}

void StackedModel::AddResidual(std::vector<float>& x,
                               const std::vector<float>& y, int64_t n) const {
  if (residual_scale_ == 1.0f) {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] += residual_scale_ * y[i];
}

absl::Status StackedModel::Logits(absl::Span<const float> h, int64_t rows,
                                  absl::Span<float> logits) const {
  TWICE_RETURN_IF_ERROR(kernels::Linear(
      h, rows, d_, lm_head_, description_.padded_vocab_size, {}, logits));
  if (logit_scale_ != 1.0f) {
    for (float& v : logits) v *= logit_scale_;
  }
  return absl::OkStatus();
}

absl::Status StackedModel::ForwardChunk(absl::Span<const int32_t> tokens,
                                        SequenceState& state,
                                        const PrefixEncoding* prefix,
                                        std::vector<float>& x) const {
  const int64_t d = d_;
  const int64_t t = static_cast<int64_t>(tokens.size());
  Embed(tokens, x);
  std::vector<float> h(t * d), y(t * d);
  const int64_t start = state.token_count();
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    LayerState& layer = state.layer(static_cast<int>(l));
    TWICE_RETURN_IF_ERROR(b.norm1.Forward(x, t, absl::MakeSpan(h)));
    if (prefix != nullptr) {
      TWICE_RETURN_IF_ERROR(
          b.mixer->ForwardPrefix(h, t, *prefix, layer, absl::MakeSpan(y)));
    } else {
      TWICE_RETURN_IF_ERROR(
          b.mixer->Forward(h, t, start, layer, absl::MakeSpan(y)));
    }
    AddResidual(x, y, t * d);
    if (b.ffn == nullptr) continue;
    TWICE_RETURN_IF_ERROR(b.norm2.Forward(x, t, absl::MakeSpan(h)));
    TWICE_RETURN_IF_ERROR(b.ffn->Forward(h, t, absl::MakeSpan(y)));
    AddResidual(x, y, t * d);
  }
  state.set_token_count(start + t);
  return absl::OkStatus();
}

absl::Status StackedModel::Read(absl::Span<const int32_t> tokens,
                                SequenceState& state,
                                const PrefixEncoding* prefix,
                                std::vector<float>& logits) const {
  std::vector<float> x;
  size_t begin = 0;
  if (prefix != nullptr) {
    // Every query of the prefix read sees the complete encoder sums, so the
    // encoder must fit in the first chunk; after it the encoder is part of
    // the state and the rest is causal.
    const size_t first = std::min<size_t>(
        tokens.size(),
        static_cast<size_t>(FirstPrefixPass(*prefix, prefill_chunk_)));
    TWICE_RETURN_IF_ERROR(
        ForwardChunk(tokens.subspan(0, first), state, prefix, x));
    begin = first;
  }
  for (; begin < tokens.size(); begin += prefill_chunk_) {
    const size_t n = std::min<size_t>(prefill_chunk_, tokens.size() - begin);
    TWICE_RETURN_IF_ERROR(
        ForwardChunk(tokens.subspan(begin, n), state, nullptr, x));
  }
  // Only the last position is projected to logits.
  const int64_t last = static_cast<int64_t>(x.size()) / d_ - 1;
  std::vector<float> h(d_);
  TWICE_RETURN_IF_ERROR(final_norm_.Forward(
      absl::MakeConstSpan(x).subspan(last * d_, d_), 1, absl::MakeSpan(h)));
  logits.resize(description_.padded_vocab_size);
  return Logits(h, 1, absl::MakeSpan(logits));
}

absl::StatusOr<std::vector<float>> StackedModel::Prefill(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (IsPrefixMode(mode)) return PrefillPrefix(tokens, state, mode);
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description_.vocab_size));
  TWICE_RETURN_IF_ERROR(
      CheckReadableState(state, description_.fingerprint, mixers_));
  std::vector<float> logits;
  SequenceState* states[] = {&state};
  TWICE_RETURN_IF_ERROR(
      DamagedOnError(Read(tokens, state, nullptr, logits), states));
  return logits;
}

absl::StatusOr<StackedModel::PrefixRead> StackedModel::MakePrefixRead(
    absl::Span<const int32_t> tokens, PrefillMode mode,
    int64_t state_tokens) const {
  const int64_t m = description_.prefix_length;
  if (m <= 0) {
    return absl::UnimplementedError(absl::StrCat(
        "this ", description_.architecture,
        " model has no prefix encoder; prefix encoding needs a JRT-RNN model"));
  }
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description_.vocab_size));
  if (state_tokens != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a prefix prefill needs an empty state, but this one has read ",
        state_tokens,
        " tokens: the non-causal prefix encoder cannot be applied after the "
        "fact; read the prefix first, then continue causally"));
  }
  // The read: [pads] + tokens (+ tokens again for Read-2x).
  const int copies = mode == PrefillMode::kPrefixReadTwice ? 2 : 1;
  const int64_t body = copies * static_cast<int64_t>(tokens.size());
  const int64_t pads =
      mode == PrefillMode::kPrefixUnpadded ? 0 : std::max<int64_t>(0, m - body);
  PrefixRead read;
  read.input.assign(static_cast<size_t>(pads),
                    static_cast<int32_t>(prefix_pad_token_id_));
  read.input.reserve(static_cast<size_t>(pads + body));
  for (int c = 0; c < copies; ++c) {
    read.input.insert(read.input.end(), tokens.begin(), tokens.end());
  }
  read.encoding.encoder_tokens = std::min<int64_t>(m, pads + body);
  read.encoding.masked_tokens = pads;
  return read;
}

absl::StatusOr<std::vector<float>> StackedModel::PrefillPrefix(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (description_.prefix_length > 0) {
    TWICE_RETURN_IF_ERROR(
        CheckReadableState(state, description_.fingerprint, mixers_));
  }
  TWICE_ASSIGN_OR_RETURN(PrefixRead read,
                         MakePrefixRead(tokens, mode, state.token_count()));
  std::vector<float> logits;
  SequenceState* states[] = {&state};
  TWICE_RETURN_IF_ERROR(
      DamagedOnError(Read(read.input, state, &read.encoding, logits), states));
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
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, description_.vocab_size));
  for (SequenceState* state : states) {
    TWICE_RETURN_IF_ERROR(
        CheckReadableState(*state, description_.fingerprint, mixers_));
  }
  const int64_t d = d_;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> positions;
  for (const SequenceState* state : states) {
    positions.push_back(state->token_count());
  }
  std::vector<float> logits(rows * description_.padded_vocab_size);
  auto step = [&]() -> absl::Status {
    std::vector<float> x, h(rows * d), y(rows * d);
    Embed(tokens, x);
    std::vector<LayerState*> layer_states(rows);
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& blk = blocks_[l];
      for (int64_t b = 0; b < rows; ++b) {
        layer_states[b] = &states[b]->layer(static_cast<int>(l));
      }
      TWICE_RETURN_IF_ERROR(blk.norm1.Forward(x, rows, absl::MakeSpan(h)));
      TWICE_RETURN_IF_ERROR(
          blk.mixer->StepBatch(h, layer_states, positions, absl::MakeSpan(y)));
      AddResidual(x, y, rows * d);
      if (blk.ffn == nullptr) continue;
      TWICE_RETURN_IF_ERROR(blk.norm2.Forward(x, rows, absl::MakeSpan(h)));
      TWICE_RETURN_IF_ERROR(blk.ffn->Forward(h, rows, absl::MakeSpan(y)));
      AddResidual(x, y, rows * d);
    }
    TWICE_RETURN_IF_ERROR(final_norm_.Forward(x, rows, absl::MakeSpan(h)));
    return Logits(h, rows, absl::MakeSpan(logits));
  };
  TWICE_RETURN_IF_ERROR(DamagedOnError(step(), states));
  for (int64_t b = 0; b < rows; ++b) {
    states[b]->set_token_count(positions[b] + 1);
  }
  return logits;
}

}  // namespace twice::engine
