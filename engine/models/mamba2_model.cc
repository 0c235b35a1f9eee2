#include "engine/models/mamba2_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/models/state_checks.h"
#include "engine/util/absl_view.h"
#include "kernels/linear.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_convert.h"

namespace twice::engine {
namespace {

constexpr char kEmbedding[] = "backbone.embedding.weight";
constexpr char kLmHead[] = "lm_head.weight";
// Tokens per layer-by-layer pass. Bounds activation memory (in_proj output
// [chunk, 2E + 2GN + H]) without changing results, since state passing is
// exact; a multiple of the checkpoints' SSD chunk (256).
constexpr int64_t kPrefillChunk = 2048;

}  // namespace

std::string Mamba2WeightName(std::string_view stored) {
  if (stored.starts_with("model.")) stored.remove_prefix(6);
  std::string name(stored);
  if (!name.starts_with("backbone.") && !name.starts_with("lm_head.")) {
    name = "backbone." + name;
  }
  constexpr std::string_view kHfEmbedding = "backbone.embeddings.";
  if (name.starts_with(kHfEmbedding)) {
    name = "backbone.embedding." + name.substr(kHfEmbedding.size());
  }
  return name;
}

absl::StatusOr<std::unique_ptr<Mamba2Model>> Mamba2Model::Create(
    Mamba2Config config, WeightMap weights,
    std::unique_ptr<Tokenizer> tokenizer, std::string fingerprint) {
  std::unique_ptr<Mamba2Model> m(new Mamba2Model());
  const int64_t d = config.hidden_size;
  const int64_t vocab = config.padded_vocab_size();
  if (tokenizer->vocab_size() > vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json has ", tokenizer->vocab_size(),
        " tokens, more than the model's ", vocab, " embedding rows"));
  }
  const WeightMap& w = weights;
  // Tied checkpoints may store the matrix under either name, or both.
  const char* embedding_name =
      w.Has(kEmbedding) || !w.Has(kLmHead) ? kEmbedding : kLmHead;
  TWICE_ASSIGN_OR_RETURN(m->embedding_,
                         w.GetMatrix(embedding_name, {vocab, d}));
  if (config.tie_word_embeddings) {
    m->lm_head_ = m->embedding_;
    if (w.Has(kLmHead)) {
      TWICE_RETURN_IF_ERROR(w.Check(kLmHead, {vocab, d}));
    }
  } else {
    TWICE_ASSIGN_OR_RETURN(m->lm_head_, w.GetMatrix(kLmHead, {vocab, d}));
  }
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string prefix = absl::StrCat("backbone.layers.", i, ".");
    TWICE_ASSIGN_OR_RETURN(
        RmsNormLayer norm,
        RmsNormLayer::Load(w, prefix + "norm.weight", d, config.norm_eps));
    TWICE_ASSIGN_OR_RETURN(std::unique_ptr<Mamba2Mixer> mixer,
                           Mamba2Mixer::Load(w, prefix, config));
    m->mixers_.push_back(mixer.get());
    m->blocks_.push_back(Block{std::move(norm), std::move(mixer)});
  }
  TWICE_ASSIGN_OR_RETURN(
      m->final_norm_,
      RmsNormLayer::Load(w, "backbone.norm_f.weight", d, config.norm_eps));

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
  desc.prefix_length = 0;
  desc.training_context = config.training_context;
  desc.num_layers = config.num_layers;
  desc.hidden_size = static_cast<int>(d);
  m->config_ = std::move(config);
  m->weights_ = std::move(weights);
  m->tokenizer_ = std::move(tokenizer);
  return m;
}

std::unique_ptr<SequenceState> Mamba2Model::NewState() const {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(blocks_.size());
  for (const Block& b : blocks_) layers.push_back(b.mixer->NewState());
  return std::make_unique<SequenceState>(description_.fingerprint,
                                         std::move(layers));
}

int64_t Mamba2Model::StatePayloadBytes() const {
  int64_t floats = 0;
  for (const Block& b : blocks_) {
    floats += b.mixer->state_shape().payload_floats();
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

absl::Status Mamba2Model::CheckTokens(absl::Span<const int32_t> tokens) const {
  return CheckTokenIds(tokens, description_.vocab_size);
}

absl::Status Mamba2Model::CheckState(SequenceState& state) const {
  return CheckReadableState(state, description_.fingerprint, mixers_);
}

absl::Status Mamba2Model::ForwardChunk(absl::Span<const int32_t> tokens,
                                       SequenceState& state,
                                       std::vector<float>& x) const {
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
    TWICE_RETURN_IF_ERROR(b.norm.Forward(x, t, absl::MakeSpan(h)));
    TWICE_RETURN_IF_ERROR(b.mixer->Forward(
        h, t, start, state.layer(static_cast<int>(l)), absl::MakeSpan(y)));
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
  }
  state.set_token_count(start + t);
  return absl::OkStatus();
}

absl::Status Mamba2Model::Head(absl::Span<const float> x, int64_t rows,
                               std::vector<float>& logits) const {
  const int64_t d = config_.hidden_size;
  std::vector<float> h(rows * d);
  TWICE_RETURN_IF_ERROR(final_norm_.Forward(x, rows, absl::MakeSpan(h)));
  logits.resize(rows * description_.padded_vocab_size);
  return kernels::Linear(h, rows, d, lm_head_, description_.padded_vocab_size,
                         {}, absl::MakeSpan(logits));
}

absl::StatusOr<std::vector<float>> Mamba2Model::Prefill(
    absl::Span<const int32_t> tokens, SequenceState& state,
    PrefillMode mode) const {
  if (IsPrefixMode(mode)) {
    return absl::UnimplementedError(absl::StrCat(
        "this ", description_.architecture,
        " model has no prefix encoder; prefix encoding needs a JRT-RNN model"));
  }
  TWICE_RETURN_IF_ERROR(CheckTokens(tokens));
  TWICE_RETURN_IF_ERROR(CheckState(state));
  std::vector<float> logits;
  auto read = [&]() -> absl::Status {
    std::vector<float> x;
    for (size_t begin = 0; begin < tokens.size(); begin += kPrefillChunk) {
      const size_t n = std::min<size_t>(kPrefillChunk, tokens.size() - begin);
      TWICE_RETURN_IF_ERROR(ForwardChunk(tokens.subspan(begin, n), state, x));
    }
    // Only the last position is projected to logits.
    const int64_t d = config_.hidden_size;
    const int64_t last = static_cast<int64_t>(x.size()) / d - 1;
    return Head(absl::MakeConstSpan(x).subspan(last * d, d), 1, logits);
  };
  SequenceState* states[] = {&state};
  TWICE_RETURN_IF_ERROR(DamagedOnError(read(), states));
  return logits;
}

absl::StatusOr<std::vector<float>> Mamba2Model::Step(
    int32_t token, SequenceState& state) const {
  SequenceState* states[] = {&state};
  return StepBatch(absl::MakeConstSpan(&token, 1), states);
}

absl::StatusOr<std::vector<float>> Mamba2Model::StepBatch(
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
  std::vector<float> logits;
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
      TWICE_RETURN_IF_ERROR(blk.norm.Forward(x, rows, absl::MakeSpan(h)));
      TWICE_RETURN_IF_ERROR(
          blk.mixer->StepBatch(h, layer_states, positions, absl::MakeSpan(y)));
      for (int64_t i = 0; i < rows * d; ++i) x[i] += y[i];
    }
    return Head(x, rows, logits);
  };
  TWICE_RETURN_IF_ERROR(DamagedOnError(step(), states));
  for (int64_t b = 0; b < rows; ++b) {
    states[b]->set_token_count(positions[b] + 1);
  }
  return logits;
}

}  // namespace twice::engine
