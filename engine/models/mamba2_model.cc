#include "engine/models/mamba2_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/mamba2_mixer.h"
#include "engine/util/absl_view.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

constexpr char kMamba2Embedding[] = "backbone.embedding.weight";
constexpr char kMamba2LmHead[] = "lm_head.weight";
// Tokens per layer-by-layer pass. Bounds activation memory (in_proj output
// [chunk, 2E + 2GN + H]) without changing results, since state passing is
// exact; a multiple of the checkpoints' SSD chunk (256). 512 keeps one
// pass's activations in the last-level cache: with 2048 (27 MiB of in_proj
// output at the 130M shape) f32 prefill ran at half the speed and the
// prefill peak was 70 MiB higher (bench/README.md).
constexpr int64_t kMamba2PrefillChunk = 512;

}  // namespace

Mamba2MixerOptions Mamba2MixerOptionsOf(const Mamba2Config& c) {
  Mamba2MixerOptions o;
  o.dim = c.hidden_size;
  o.inner = c.d_inner();
  o.head_dim = c.head_dim;
  o.n_groups = c.n_groups;
  o.d_state = c.d_state;
  o.d_conv = c.d_conv;
  o.chunk = c.chunk_size;
  return o;  // the gated norm's 1e-5, as upstream's mamba2.py fixes it
}

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
  Parts p = PartsOf(config, vocab, std::move(weights), std::move(tokenizer),
                    std::move(fingerprint));
  const WeightMap& w = p.weights;
  TWICE_RETURN_IF_ERROR(LoadEmbeddingAndHead(w, kMamba2Embedding, kMamba2LmHead,
                                             config.tie_word_embeddings,
                                             {vocab, d}, p));
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string prefix = absl::StrCat("backbone.layers.", i, ".");
    Block b;
    TWICE_ASSIGN_OR_RETURN(
        b.norm1,
        RmsNormLayer::Load(w, prefix + "norm.weight", d, config.norm_eps));
    TWICE_ASSIGN_OR_RETURN(
        std::unique_ptr<Mamba2Mixer> mixer,
        Mamba2Mixer::Load(w, prefix + "mixer.", Mamba2MixerOptionsOf(config)));
    m->state_payload_bytes_ += mixer->state_shape().payload_floats() *
                               static_cast<int64_t>(sizeof(float));
    b.mixer = std::move(mixer);
    p.blocks.push_back(std::move(b));
  }
  TWICE_ASSIGN_OR_RETURN(
      p.final_norm,
      RmsNormLayer::Load(w, "backbone.norm_f.weight", d, config.norm_eps));
  p.prefill_chunk = kMamba2PrefillChunk;
  TWICE_RETURN_IF_ERROR(m->Finish(std::move(p)));
  m->config_ = std::move(config);
  return m;
}

}  // namespace twice::engine
