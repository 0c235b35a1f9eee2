// WriteRandomMamba2Model: the Mamba-2 branch of WriteRandomModel
// (init_model.h), `twice init-model --arch=mamba2`.
//
// Presets:
//   "tiny"               D 64, 2 layers, N 16, P 16 (H 8), G 1, K 4,
//                        chunk 64: tests and smoke runs of the services
//   "mamba2-130m-shape"  state-spaces/mamba2-130m: D 768, 24 layers, N 128,
//                        P 64 (H 24), expand 2, G 1, K 4, chunk 256; about
//                        0.5 GB of f32 weights
// Both use the given tokenizer's vocabulary padded to a multiple of 16. The
// real checkpoint has the GPT-NeoX tokenizer (50277 ids -> 50288 rows); with
// the repository's GPT-2 tokenizer (50257 ids) the embedding has 50272
// rows, 0.1 % fewer parameters.
//
// Initialisation (upstream's scheme, deterministic): linear and embedding
// weights N(0, 0.02), out_proj scaled by 1/sqrt(2·layers); conv taps
// N(0, 0.1), conv bias N(0, 0.02); Δ at init spread log-uniformly over
// [1e-3, 0.1] across heads (dt_bias = softplus⁻¹(Δ)); A = -(1 … 16) across
// heads (A_log = log of it); D = 1; norms 1.
#ifndef TWICE_ENGINE_MODELS_INIT_MAMBA2_H_
#define TWICE_ENGINE_MODELS_INIT_MAMBA2_H_

#include "absl/status/status.h"
#include "engine/models/init_model.h"

namespace twice::engine {

[[nodiscard]] absl::Status WriteRandomMamba2Model(
    const InitModelOptions& options);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_INIT_MAMBA2_H_
