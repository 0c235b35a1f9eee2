// WriteRandomModel: writes a model directory with random weights, for
// tests, benchmarks and smoke runs of the services (`twice init-model`).
//
// The directory gets config.json, model.safetensors (f32, or bf16 / f16 as
// requested) and a copy of the tokenizer.json; LoadModel reads it back. The
// output depends only on the options: the same seed gives byte-identical files
// on every platform (the generator is self-contained, not
// std::normal_distribution).
#ifndef TWICE_ENGINE_MODELS_INIT_MODEL_H_
#define TWICE_ENGINE_MODELS_INIT_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/tensor/tensor.h"

namespace twice::engine {

struct InitModelOptions {
  // Default "based"; or "jrt" (JRT-RNN: prefix linear attention in place of
  // linear attention, with proj_k_enc / proj_v_enc); or "mamba2" (presets
  // in init_mamba2.h); or "llama" / "rat" (presets in init_llama_rat.h); or
  // "nemotron_h" or "granitemoehybrid" (presets in init_hybrid.h).
  std::string architecture = "based";
  // Default "tiny": d 64, 4 layers (conv, linear attention, sliding window,
  // conv), 4 heads, F 16, n_inner 128, window_size 64; jrt: enc_length 64.
  // "360m-shape": the based-360m configuration (d 1024, 27 layers, 16 heads,
  // window_size 256), about 1.45 GB of f32 weights; jrt: the JRT-360M shape
  // (26 layers, enc_length 1024).
  std::string preset = "tiny";
  // Required. Created if missing; existing files are replaced.
  std::string out_dir;
  // tokenizer.json to copy; it fixes vocab_size (GPT-2: 50257, padded to
  // 50264). Default: the GPT-2 tokenizer shipped in the repository, relative
  // to the working directory.
  std::string tokenizer_json = "models/tokenizers/gpt2/tokenizer.json";
  // Default 0.
  uint64_t seed = 0;
  // The dtype every tensor is stored in (F32, BF16 or F16, as a published
  // checkpoint; `twice init-model --weights_dtype`). The random values are
  // drawn in f32 and rounded. Default: unset = F32.
  std::optional<DType> weights_dtype;
};

// INVALID_ARGUMENT for an unknown architecture / preset, an empty out_dir or
// an unparsable tokenizer; NOT_FOUND / UNAVAILABLE for I/O errors.
[[nodiscard]] absl::Status WriteRandomModel(const InitModelOptions& options);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_INIT_MODEL_H_
