// LayerDecodeBench: the decode step of ONE sequence-mixing layer, RAT
// against softmax attention at the same width, the comparison the RAT paper
// makes at layer level (fact sheet §2.7: D 2048, 16 heads of 128, L = 16,
// "9x faster generation at the 4K position"). At model level both are
// bound by streaming the weights (bench/README.md); a layer step with a
// batch shows what the paper measures: attention reads a KV row per token
// of every sequence, RAT one per chunk.
//
// Rows, per layer (attention; RAT at each chunk size L) and decode position
// P: a batch of B sequences (B = batch_tokens / P, at least 1; the paper
// keeps batch x T fixed) grown to P without reading (synthetic_state.h),
// then StepBatch of one token each, timed (median of `steps` steps, each
// at the next position). tokens/s = B / step; "x attention" = RAT's
// tokens/s over attention's at the same P and B. Weights are random
// (seeded), in `weights_dtype`; states f32, as the engine keeps them.
#ifndef TWICE_BENCH_LAYER_DECODE_BENCH_H_
#define TWICE_BENCH_LAYER_DECODE_BENCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"

namespace twice::bench {

struct LayerDecodeOptions {
  // Model width and heads (head dim = dim / heads). Defaults: the paper's
  // 2048 and 16.
  int64_t dim = 2048;
  int64_t heads = 16;
  // RAT's key/query groups (the engine's rat presets use 2). Default 2.
  int64_t rat_groups = 2;
  // Chunk sizes L, one RAT row each. Default 16, 64.
  std::vector<int64_t> chunk_sizes = {16, 64};
  // Decode positions. Default 4096, 16384, 32768.
  std::vector<int64_t> positions = {4096, 16384, 32768};
  // batch x position per row (B = batch_tokens / P, at least 1); 0 = batch
  // 1 for every row. Default 65536 (the paper uses 262,144 on a GPU; this
  // keeps attention's 32k KV at 1 GiB).
  int64_t batch_tokens = 65536;
  // Timed steps per row (the median is reported). Default 8.
  int steps = 8;
  uint64_t seed = 0;
  // Weight dtype; nullopt = f32.
  std::optional<kernels::DType> weights_dtype;
};

struct LayerDecodeRow {
  std::string layer;  // "attention" or "rat"
  int64_t chunk = 0;  // RAT's L; 0 for attention
  int64_t position = 0;
  int64_t batch = 0;
  double step_ms = 0;  // median over the timed steps
  double tokens_per_second = 0;
  int64_t state_bytes = 0;  // one sequence's layer state at `position`
  double vs_attention = 0;  // tokens/s over attention's (1 for it)
};

[[nodiscard]] absl::StatusOr<std::vector<LayerDecodeRow>> RunLayerDecodeBench(
    const LayerDecodeOptions& options);

// The rows as a text table (or JSON lines), with the paper's figure beside
// the L = 16 row at 4k.
std::string FormatLayerDecodeRows(const std::vector<LayerDecodeRow>& rows,
                                  bool json);

}  // namespace twice::bench

#endif  // TWICE_BENCH_LAYER_DECODE_BENCH_H_
