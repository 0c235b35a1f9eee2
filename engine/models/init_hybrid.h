// WriteRandomNemotronHModel / WriteRandomGraniteHybridModel: the hybrid
// branches of WriteRandomModel (init_model.h), `twice init-model
// --arch=nemotron_h|granitemoehybrid`.
//
// Nemotron-H presets (vocabulary = the given tokenizer's, e.g. GPT-2 50257;
// untied head, as the published models):
//   "tiny"                 d 64, layers M * M - (Mamba-2, attention,
//                          Mamba-2, MLP); Mamba 8 heads of P 16 over 2
//                          groups, N 16, K 4, chunk 64; attention 4 heads
//                          over 2 KV heads (hd 16); relu² MLP 256
//   "nemotron-h-8b-width"  Nemotron-H-8B's widths (fact sheet §2.1: d 4096;
//                          Mamba 128 heads of P 64 over 8 groups, N 128;
//                          attention 32 heads over 8 KV heads of 128; MLP
//                          21504) with 4 of its 52 layers, M - M *, so that
//                          every layer kind is timed and f32 weights fit a
//                          small machine: about 3.4 GB with GPT-2's vocabulary
// Granite-4.0-H presets (tied head; dense ones have the shared MLP only):
//   "tiny"                 d 64, layers mamba, attention, mamba; Mamba 8
//                          heads of P 16 (expand 2) over 2 groups, N 16,
//                          chunk 64; attention 4 heads over 2 KV heads (hd
//                          16); SwiGLU 128; multipliers 2 / 0.5 / 0.25 / 2
//   "granite-4.0-h-tiny-width"  h-tiny's widths (fact sheet §3.1: d 1536;
//                          Mamba 48 heads of 64, N 128; attention 12 heads
//                          over 4 KV heads; shared MLP 1024) with its first
//                          10 of 40 layers (attention at 5) and no experts:
//                          about 1 GB of f32 weights with GPT-2's vocabulary
//   "tiny-moe"             "tiny" with 4 experts of width 64, 2 per token
//   "granite-4.0-h-tiny-moe-width"  h-tiny as published, experts included
//                          (64 of width 512, 6 per token), with its first 6
//                          layers (attention at 5): about 4.4 GB of f32
//                          weights, 1.1 GB of them read per decode step
// Initialisation (deterministic in the seed and the tensor name): linear
// and embedding weights N(0, 0.02), projections back into the residual
// stream scaled by 1/sqrt(2·layers), norms and D 1, conv taps N(0, 0.1),
// dt_bias so that softplus(dt_bias) is log-uniform in [1e-3, 0.1] and
// A_log = log(U[1, 16]), as upstream initialises Mamba-2.
#ifndef TWICE_ENGINE_MODELS_INIT_HYBRID_H_
#define TWICE_ENGINE_MODELS_INIT_HYBRID_H_

#include "absl/status/status.h"
#include "engine/models/init_model.h"

namespace twice::engine {

[[nodiscard]] absl::Status WriteRandomNemotronHModel(
    const InitModelOptions& options);
[[nodiscard]] absl::Status WriteRandomGraniteHybridModel(
    const InitModelOptions& options);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_INIT_HYBRID_H_
