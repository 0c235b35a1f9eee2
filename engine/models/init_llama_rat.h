// WriteRandomLlamaModel / WriteRandomRatModel: the llama and rat branches of
// WriteRandomModel (init_model.h), `twice init-model --arch=llama|rat`.
//
// Presets (vocabulary = the given tokenizer's, e.g. GPT-2 50257):
//   llama "tiny"              d 64, 2 layers, 4 heads over 2 KV heads
//                             (hd 16), SwiGLU 128, tied
//   llama "llama-360m-shape"  the SmolLM2-360M Llama shape: d 960, 32
//                             layers, 15 heads over 5 KV heads (hd 64),
//                             SwiGLU 2560, rope_theta 1e5, tied; about
//                             1.4 GB of f32 weights
//   rat "tiny"                D 64, 2 RAT layers, 4 heads (hd 16), 2 q/k
//                             groups, chunk 16, FFN 256, tied
//   rat "tiny-swa"            the same, interleaved (layer 1 sliding window
//                             of 32)
//   rat "rat-xl-shape"        one RAT-xl layer shape (D 2048, 16 heads of
//                             128, 2 q/k groups, L 16, FFN 8192) with 6 of
//                             the 24 layers, so that f32 weights fit a
//                             small machine: about 1.7 GB
// Initialisation (deterministic in the seed and the tensor name): linear
// and embedding weights N(0, 0.02), projections back into the residual
// stream scaled by 1/sqrt(2·layers), norms 1, RAT gate_bias log(U[1, L-1])
// as upstream.
#ifndef TWICE_ENGINE_MODELS_INIT_LLAMA_RAT_H_
#define TWICE_ENGINE_MODELS_INIT_LLAMA_RAT_H_

#include "absl/status/status.h"
#include "engine/models/init_model.h"

namespace twice::engine {

[[nodiscard]] absl::Status WriteRandomLlamaModel(
    const InitModelOptions& options);
[[nodiscard]] absl::Status WriteRandomRatModel(const InitModelOptions& options);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_INIT_LLAMA_RAT_H_
