// Grows a model's state to a late position without reading the tokens, so
// the benchmark can time a decode step at position 32k for a model whose
// prefill there would take many minutes (a Transformer's is quadratic).
//
// Layers whose memory grows with the sequence get random rows up to the
// position: a full KV cache (Llama) gets keys / values, a RAT chunk-KV
// state gets closed chunks up to ⌊P / L⌋, a sliding-window ring has its
// read count moved on (its slots are reused, its size does not change).
// Fixed-size recurrent states (linear attention, conv tails, SSM) are left
// as they are: what a decode step costs does not depend on their position.
// The state then claims P tokens read, so the next Step runs at position P
// (RoPE angles, chunk boundaries, cache lengths) with realistic cost; the
// logits it produces mean nothing.
#ifndef TWICE_BENCH_SYNTHETIC_STATE_H_
#define TWICE_BENCH_SYNTHETIC_STATE_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "engine/state/layer_state.h"
#include "engine/state/sequence_state.h"

namespace twice::bench {

// One layer's part of GrowStateTo: grows `layer` (a state that has read at
// most `position` tokens) to claim `position`, drawing rows from `rng`.
void GrowLayerStateTo(engine::LayerState& layer, int64_t position,
                      std::mt19937_64& rng);

// INVALID_ARGUMENT when `position` is below what the state has read.
[[nodiscard]] absl::Status GrowStateTo(engine::SequenceState& state,
                                       int64_t position, uint64_t seed);

}  // namespace twice::bench

#endif  // TWICE_BENCH_SYNTHETIC_STATE_H_
