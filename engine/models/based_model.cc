#include "engine/models/based_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/base_conv.h"
#include "engine/layers/based_linear_attention.h"
#include "engine/layers/prefix_linear_attention.h"
#include "engine/layers/sliding_window_attention.h"
#include "engine/models/state_checks.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_convert.h"

namespace twice::engine {
namespace {

constexpr char kEmbedding[] = "transformer.embeddings.word_embeddings.weight";
constexpr char kLmHead[] = "lm_head.weight";
// Tokens per layer-by-layer pass. Bounds activation memory (the MLP holds
// [chunk, 2h] floats) without changing results, since state passing is exact.
constexpr int64_t kPrefillChunk = 1024;

[[nodiscard]] absl::StatusOr<std::unique_ptr<Mixer>> LoadMixer(
    const WeightMap& w, const BasedConfig& c, int layer,
    const std::string& prefix) {
  switch (c.mixer(layer)) {
    case BasedMixerKind::kBaseConv: {
      TWICE_ASSIGN_OR_RETURN(
          auto m, BaseConv::Load(w, prefix, c.hidden_size, c.conv_inner(),
                                 c.conv_kernel_size));
      return std::unique_ptr<Mixer>(std::move(m));
    }
    case BasedMixerKind::kLinearAttention:
    case BasedMixerKind::kPrefixLinearAttention: {
      LinearAttentionOptions o;
      o.dim = c.hidden_size;
      o.heads = c.linear_attention_heads;
      o.feature_dim = c.feature_dim;
      o.eps = c.linear_attention_eps;
      if (c.mixer(layer) == BasedMixerKind::kPrefixLinearAttention) {
        TWICE_ASSIGN_OR_RETURN(auto m,
                               PrefixLinearAttention::Load(w, prefix, o));
        return std::unique_ptr<Mixer>(std::move(m));
      }
      TWICE_ASSIGN_OR_RETURN(auto m, BasedLinearAttention::Load(w, prefix, o));
      return std::unique_ptr<Mixer>(std::move(m));
    }
    case BasedMixerKind::kSlidingWindow: {
      SlidingWindowOptions o;
      o.dim = c.hidden_size;
      o.heads = c.num_heads;
      o.window = c.window_left();
      o.rotary_base = c.rotary_base;
      TWICE_ASSIGN_OR_RETURN(auto m,
                             SlidingWindowAttention::Load(w, prefix, o));
      return std::unique_ptr<Mixer>(std::move(m));
    }
  }
  return absl::InternalError("unknown Based mixer kind");
}

}  // namespace

absl::StatusOr<std::unique_ptr<BasedModel>> BasedModel::Create(
    BasedConfig config, WeightMap weights, std::unique_ptr<Tokenizer> tokenizer,
    std::string fingerprint) {
  std::unique_ptr<BasedModel> m(new BasedModel());
  const int64_t d = config.hidden_size;
  const int64_t vocab = config.padded_vocab_size();
  if (tokenizer->vocab_size() > vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json has ", tokenizer->vocab_size(),
        " tokens, more than the model's ", vocab, " embedding rows"));
  }
  const WeightMap& w = weights;
  // The public checkpoints store the tied matrix under either name.
  const char* embedding_name =
      w.Has(kEmbedding) || !w.Has(kLmHead) ? kEmbedding : kLmHead;
  TWICE_ASSIGN_OR_RETURN(m->embedding_,
                         w.GetMatrix(embedding_name, {vocab, d}));
  if (config.tie_word_embeddings) {
    // A view, not a copy: a converted (bf16) embedding is hundreds of MB.
    m->lm_head_ = m->embedding_;
    if (w.Has(kLmHead)) {
      TWICE_RETURN_IF_ERROR(w.Check(kLmHead, {vocab, d}));
    }
  } else {
    TWICE_ASSIGN_OR_RETURN(m->lm_head_, w.GetMatrix(kLmHead, {vocab, d}));
  }
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string prefix = absl::StrCat("transformer.layers.", i, ".");
    TWICE_ASSIGN_OR_RETURN(
        RmsNormLayer norm1,
        RmsNormLayer::Load(w, prefix + "norm1.weight", d, config.norm_eps));
    TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Mixer> mixer,
                           LoadMixer(w, config, i, prefix));
    TWICE_ASSIGN_OR_RETURN(
        RmsNormLayer norm2,
        RmsNormLayer::Load(w, prefix + "norm2.weight", d, config.norm_eps));
    TWICE_ASSIGN_OR_RETURN(SwiGluMlp mlp,
                           SwiGluMlp::Load(w, prefix, d, config.mlp_hidden()));
    m->mixers_.push_back(mixer.get());
    m->blocks_.push_back(Block{std::move(norm1), std::move(mixer),
                               std::move(norm2), std::move(mlp)});
  }
  TWICE_ASSIGN_OR_RETURN(
      m->final_norm_,
      RmsNormLayer::Load(w, "transformer.ln_f.weight", d, config.norm_eps));

  ModelDescription& desc = m->description_;
  desc.architecture = config.architecture;
  desc.fingerprint = std::move(fingerprint);
  desc.vocab_size = tokenizer->vocab_size();
  desc.padded_vocab_size = static_cast<int32_t>(vocab);
  desc.eos_token_id = static_cast<int32_t>(config.eos_token_id);
  if (desc.eos_token_id < 0) {
    desc.eos_token_id = tokenizer->TokenToId("<|endoftext|>").value_or(-1);
  }
  if (desc.eos_token_id >= desc.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: eos_token_id ", desc.eos_token_id,
        " is outside the tokenizer vocabulary of ", desc.vocab_size));
  }
  if (config.is_jrt() && config.prefix_pad_token_id >= desc.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: prefix_pad_token_id ", config.prefix_pad_token_id,
        " is outside the tokenizer vocabulary of ", desc.vocab_size));
  }
  desc.prefix_length = config.prefix_length;
  desc.training_context = config.training_context;
  desc.num_layers = config.num_layers;
  desc.hidden_size = static_cast<int>(d);
  m->config_ = std::move(config);
  m->weights_ = std::move(weights);
  m->tokenizer_ = std::move(tokenizer);
  return m;
}

std::unique_ptr<SequenceState> BasedModel::NewState() const {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(blocks_.size());
  for (const Block& b : blocks_) layers.push_back(b.mixer->NewState());
  return std::make_unique<SequenceState>(description_.fingerprint,
                                         std::move(layers));
}

absl::Status BasedModel::CheckTokens(absl::Span<const int32_t> tokens) const {
  return CheckTokenIds(tokens, description_.vocab_size);
}

absl::Status BasedModel::CheckState(SequenceState& state) const {
  return CheckReadableState(state, description_.fingerprint, mixers_);
}

absl::Status BasedModel::ForwardChunk(absl::Span<const int32_t> tokens,
                                      SequenceState& state,
                                      std::vector<float>& x,
                                      const PrefixEncoding* prefix) const {
  const int64_t d = config_.hidden_size;
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
    if (prefix != nullptr) {
      TWICE_RETURN_IF_ERROR(b.mixer->ForwardPrefix(
          h, t, *prefix, state.layer(l), absl::MakeSpan(y)));
    } else {
      TWICE_RETURN_IF_ERROR(
          b.mixer->Forward(h, t, start, state.layer(l), absl::MakeSpan(y)));
    }
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
    TWICE_RETURN_IF_ERROR(b.norm2.Forward(x, t, absl::MakeSpan(h)));
    TWICE_RETURN_IF_ERROR(b.mlp.Forward(h, t, absl::MakeSpan(y)));
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
  }
  state.set_token_count(start + t);
  return absl::OkStatus();
}

absl::Status BasedModel::Forward(absl::Span<const int32_t> tokens,
                                 SequenceState& state,
                                 std::vector<float>& logits,
                                 const PrefixEncoding* prefix) const {
  const int64_t d = config_.hidden_size;
  std::vector<float> x;
  size_t begin = 0;
  if (prefix != nullptr) {
    // Every query of the prefix read sees the complete encoder sums, so the
    // encoder must fit in the first chunk; after it the encoder is part of
    // the state and the rest is causal.
    const size_t first = std::min<size_t>(
        tokens.size(),
        static_cast<size_t>(std::max(kPrefillChunk, prefix->encoder_tokens)));
    TWICE_RETURN_IF_ERROR(
        ForwardChunk(tokens.subspan(0, first), state, x, prefix));
    begin = first;
  }
  for (; begin < tokens.size(); begin += kPrefillChunk) {
    const size_t n = std::min<size_t>(kPrefillChunk, tokens.size() - begin);
    TWICE_RETURN_IF_ERROR(
        ForwardChunk(tokens.subspan(begin, n), state, x, nullptr));
  }
  // Only the last position is projected to logits.
  const int64_t last = static_cast<int64_t>(x.size()) / d - 1;
  std::vector<float> h(d);
  TWICE_RETURN_IF_ERROR(final_norm_.Forward(
      absl::MakeConstSpan(x).subspan(last * d, d), 1, absl::MakeSpan(h)));
  logits.resize(description_.padded_vocab_size);
  return kernels::Linear(h, 1, d, lm_head_, description_.padded_vocab_size, {},
                         absl::MakeSpan(logits));
}

absl::StatusOr<std::vector<float>> BasedModel::Run(
    absl::Span<const int32_t> tokens, SequenceState& state) const {
  TWICE_RETURN_IF_ERROR(CheckTokens(tokens));
  TWICE_RETURN_IF_ERROR(CheckState(state));
  std::vector<float> logits;
  SequenceState* states[] = {&state};
  TWICE_RETURN_IF_ERROR(
      DamagedOnError(Forward(tokens, state, logits, nullptr), states));
  return logits;
}

absl::StatusOr<std::vector<float>> BasedModel::PrefillPrefix(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (config_.prefix_length <= 0) {
    return absl::UnimplementedError(absl::StrCat(
        "this ", description_.architecture,
        " model has no prefix encoder; prefix encoding needs a JRT-RNN model"));
  }
  TWICE_RETURN_IF_ERROR(CheckTokens(tokens));
  TWICE_RETURN_IF_ERROR(CheckState(state));
  if (state.token_count() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a prefix prefill needs an empty state, but this one has read ",
        state.token_count(),
        " tokens: the non-causal prefix encoder cannot be applied after the "
        "fact; read the prefix first, then continue causally"));
  }
  // The read: [pads] + tokens (+ tokens again for Read-2x).
  const int64_t m = config_.prefix_length;
  const int copies = mode == PrefillMode::kPrefixReadTwice ? 2 : 1;
  const int64_t body = copies * static_cast<int64_t>(tokens.size());
  const int64_t pads =
      mode == PrefillMode::kPrefixUnpadded ? 0 : std::max<int64_t>(0, m - body);
  std::vector<int32_t> input(static_cast<size_t>(pads),
                             static_cast<int32_t>(config_.prefix_pad_token_id));
  input.reserve(static_cast<size_t>(pads + body));
  for (int c = 0; c < copies; ++c) {
    input.insert(input.end(), tokens.begin(), tokens.end());
  }
  PrefixEncoding prefix;
  prefix.encoder_tokens = std::min<int64_t>(m, pads + body);
  prefix.masked_tokens = pads;
  std::vector<float> logits;
  SequenceState* states[] = {&state};
  TWICE_RETURN_IF_ERROR(
      DamagedOnError(Forward(input, state, logits, &prefix), states));
  return logits;
}

absl::StatusOr<std::vector<float>> BasedModel::Prefill(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (IsPrefixMode(mode)) return PrefillPrefix(tokens, state, mode);
  return Run(tokens, state);
}

absl::StatusOr<std::vector<float>> BasedModel::Step(
    int32_t token, SequenceState& state) const {
  SequenceState* states[] = {&state};
  return StepBatch(absl::MakeConstSpan(&token, 1), states);
}

absl::StatusOr<std::vector<float>> BasedModel::StepBatch(
    absl::Span<const int32_t> tokens,
    absl::Span<SequenceState* const> states) const {
  TWICE_RETURN_IF_ERROR(CheckStepBatchShape(tokens, states));
  TWICE_RETURN_IF_ERROR(CheckTokens(tokens));
  for (SequenceState* state : states) {
    TWICE_RETURN_IF_ERROR(CheckState(*state));
  }
  const int64_t d = config_.hidden_size;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> positions;
  for (const SequenceState* state : states) {
    positions.push_back(state->token_count());
  }
  std::vector<float> logits(rows * description_.padded_vocab_size);
  auto step = [&]() -> absl::Status {
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
      TWICE_RETURN_IF_ERROR(blk.norm1.Forward(x, rows, absl::MakeSpan(h)));
      TWICE_RETURN_IF_ERROR(
          blk.mixer->StepBatch(h, layer_states, positions, absl::MakeSpan(y)));
      for (int64_t i = 0; i < rows * d; ++i) x[i] += y[i];
      TWICE_RETURN_IF_ERROR(blk.norm2.Forward(x, rows, absl::MakeSpan(h)));
      TWICE_RETURN_IF_ERROR(blk.mlp.Forward(h, rows, absl::MakeSpan(y)));
      for (int64_t i = 0; i < rows * d; ++i) x[i] += y[i];
    }
    TWICE_RETURN_IF_ERROR(final_norm_.Forward(x, rows, absl::MakeSpan(h)));
    return kernels::Linear(h, rows, d, lm_head_, description_.padded_vocab_size,
                           {}, absl::MakeSpan(logits));
  };
  TWICE_RETURN_IF_ERROR(DamagedOnError(step(), states));
  for (int64_t b = 0; b < rows; ++b) {
    states[b]->set_token_count(positions[b] + 1);
  }
  return logits;
}

}  // namespace twice::engine
