// Fuzzes every config.json parser (engine/config): Based / JRT, Mamba-2,
// Llama, RAT, Nemotron-H and Granite-4.0-H, and the architecture sniffers
// (with Python's Infinity / NaN literals). An accepted config must have the
// positive dimensions the models divide by.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/config/based_config.h"
#include "engine/config/granite_hybrid_config.h"
#include "engine/config/json_fields.h"
#include "engine/config/llama_config.h"
#include "engine/config/mamba2_config.h"
#include "engine/config/nemotron_h_config.h"
#include "engine/config/rat_config.h"
#include "tests/fuzz/fuzz_util.h"

using twice::fuzz::Die;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  (void)twice::engine::config::ConfigArchitecture(json);
  (void)twice::engine::IsMamba2ConfigJson(json);
  if (auto c = twice::engine::ParseBasedConfig(json); c.ok()) {
    if (c->hidden_size <= 0 || c->num_layers <= 0 || c->vocab_size <= 0) {
      Die("accepted Based config with a non-positive dimension");
    }
    (void)c->padded_vocab_size();
    (void)c->mlp_hidden();
    for (int l = 0; l < c->num_layers; ++l) (void)c->mixer(l);
  }
  if (auto c = twice::engine::ParseMamba2Config(json); c.ok()) {
    if (c->hidden_size <= 0 || c->num_layers <= 0 || c->head_dim <= 0 ||
        c->vocab_size <= 0) {
      Die("accepted Mamba-2 config with a non-positive dimension");
    }
    (void)c->d_in_proj();
    (void)c->padded_vocab_size();
  }
  if (auto c = twice::engine::ParseLlamaConfig(json); c.ok()) {
    if (c->hidden_size <= 0 || c->num_layers <= 0 || c->num_heads <= 0 ||
        c->num_kv_heads <= 0 || c->head_dim <= 0 || c->vocab_size <= 0) {
      Die("accepted Llama config with a non-positive dimension");
    }
    if (c->num_heads % c->num_kv_heads != 0) {
      Die("accepted Llama config whose heads do not group");
    }
  }
  if (auto c = twice::engine::ParseRatConfig(json); c.ok()) {
    if (c->hidden_size <= 0 || c->num_layers <= 0 || c->num_heads <= 0 ||
        c->head_dim <= 0 || c->chunk_size <= 0 || c->vocab_size <= 0) {
      Die("accepted RAT config with a non-positive dimension");
    }
    (void)c->in_proj_rows();
  }
  if (auto c = twice::engine::ParseNemotronHConfig(json); c.ok()) {
    if (c->hidden_size <= 0 || c->num_layers() <= 0 || c->mamba_heads <= 0 ||
        c->mamba_head_dim <= 0 || c->mamba_heads % c->n_groups != 0 ||
        c->vocab_size <= 0) {
      Die("accepted Nemotron-H config with a non-positive dimension");
    }
    for (int l = 0; l < c->num_layers(); ++l) {
      if (c->kind(l) == twice::engine::NemotronHLayerKind::kAttention &&
          (c->num_heads <= 0 || c->num_kv_heads <= 0 || c->head_dim <= 0 ||
           c->num_heads % c->num_kv_heads != 0)) {
        Die("accepted Nemotron-H attention layer without valid heads");
      }
      if (c->kind(l) == twice::engine::NemotronHLayerKind::kMlp &&
          c->intermediate_size <= 0) {
        Die("accepted Nemotron-H MLP layer without a width");
      }
    }
  }
  if (auto c = twice::engine::ParseGraniteHybridConfig(json); c.ok()) {
    if (c->hidden_size <= 0 || c->num_layers() <= 0 || c->mamba_heads <= 0 ||
        c->mamba_head_dim <= 0 || c->num_heads <= 0 || c->head_dim <= 0 ||
        c->num_heads % c->num_kv_heads != 0 ||
        c->mamba_heads % c->n_groups != 0 || c->intermediate_size <= 0 ||
        !(c->logits_scaling > 0) || c->vocab_size <= 0) {
      Die("accepted Granite-4.0-H config with a non-positive dimension");
    }
  }
  return 0;
}
