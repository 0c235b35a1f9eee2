// Top-k routing of a mixture-of-experts layer (Granite-4.0-H's
// block_sparse_moe) and the two row moves around its experts:
//
//   RouteTopK          each row's k largest router logits (raw, no bias;
//                      ties: the lower expert; NaN ranks last), gated by a
//                      softmax over those k (in double, then f32)
//   GatherRows         dst[i, :] = src[routes.source_row[i], :]: the rows
//                      of every expert, one expert after another
//   CombineRoutedRows  dst[r, :] (+)= scale · (base[r, :] +
//                      Σ_j gate[r, j] · routed[entry[r, j], :]), the k
//                      terms added one by one in ascending expert order
//
// The same routing for products run per (row, choice) pair, as a decode
// step on a device runs them (no host in the middle of the pass):
//
//   RouteTopKPairs      RouteTopK's experts and gates in row order: pair
//                       p = r·k + j is row r's j-th expert (ascending) and
//                       its gate; the experts written as floats (exact
//                       below 2^24), so a device's float memory holds them;
//                       a padding row's pairs take kNoExpert and gate 0
//   CombineRoutedPairs  dst[r, :] += scale · (base[r, :] + Σ_j gate[r·k +
//                       j] · routed[r·k + j, :]), j ascending: the sum of
//                       CombineRoutedRows, term for term
//
// A route table lists rows·k entries grouped by expert (ascending) and, in
// each expert, by row (ascending), so one expert's rows are one contiguous
// block [expert_begin[e], expert_begin[e + 1]) that a single GEMM serves.
// The combine's fixed order makes a row's sum independent of the batch it
// is in. Layouts (row-major, contiguous): logits [rows, experts], src
// [*, cols], routed [rows·k, cols], base and dst [rows, cols].
#ifndef TWICE_KERNELS_TOP_K_ROUTING_H_
#define TWICE_KERNELS_TOP_K_ROUTING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace twice::kernels {

struct TopKRoutes {
  int64_t rows = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  // [rows·k]: the row entry i reads; grouped by expert, rows ascending.
  std::vector<int32_t> source_row;
  // [experts + 1]: expert e's entries are [expert_begin[e],
  // expert_begin[e + 1]).
  std::vector<int64_t> expert_begin;
  // [rows, k]: row r's entries, in ascending expert order, and their gates.
  std::vector<int32_t> entry;
  std::vector<float> gate;
};

[[nodiscard]] absl::StatusOr<TopKRoutes> RouteTopK(
    absl::Span<const float> logits, int64_t rows, int64_t experts,
    int64_t top_k);

// INVALID_ARGUMENT unless `routes` is a consistent table (sizes, entries in
// range, every entry used once): what the row moves may trust.
[[nodiscard]] absl::Status CheckRoutes(const TopKRoutes& routes);

// The checks of the two row moves, on sizes and the host copy of the
// routes (shared with their CUDA twins).
[[nodiscard]] absl::Status CheckGatherRows(int64_t src_size, int64_t cols,
                                           absl::Span<const int32_t> source_row,
                                           int64_t dst_size);
[[nodiscard]] absl::Status CheckCombineRoutedRows(int64_t base_size,
                                                  int64_t routed_size,
                                                  int64_t cols,
                                                  const TopKRoutes& routes,
                                                  int64_t dst_size);

[[nodiscard]] absl::Status GatherRows(absl::Span<const float> src, int64_t cols,
                                      absl::Span<const int32_t> source_row,
                                      absl::Span<float> dst);

// dst may alias base (the host layer combines in place).
[[nodiscard]] absl::Status CombineRoutedRows(absl::Span<const float> base,
                                             absl::Span<const float> routed,
                                             int64_t cols,
                                             const TopKRoutes& routes,
                                             float scale, bool accumulate,
                                             absl::Span<float> dst);

// Experts below this are exact as floats (RouteTopKPairs).
inline constexpr int64_t kMaxPairExperts = int64_t{1} << 24;

// The expert of a pair that takes none (a padding row's): a routed product
// writes zeros for it and its gate is 0, so it adds nothing.
inline constexpr float kNoExpert = -1.0f;

// The rows a decode step adds to fill its batch-size bucket, known by
// their slots: row r is padding when row_slots[r] >= first_slot. Their
// pairs take kNoExpert, so a padded step reads no expert's weights that
// a real row does not use. Empty row_slots: no padding.
struct PaddingRows {
  absl::Span<const int32_t> row_slots;  // [rows] or empty
  int32_t first_slot = 0;
};

// pair_experts and pair_gates [rows·k]; experts < kMaxPairExperts.
[[nodiscard]] absl::Status RouteTopKPairs(absl::Span<const float> logits,
                                          int64_t rows, int64_t experts,
                                          int64_t top_k,
                                          const PaddingRows& padding,
                                          absl::Span<float> pair_experts,
                                          absl::Span<float> pair_gates);

// base, dst [rows, cols], routed [rows·k, cols], gates [rows·k]; dst may
// alias base.
[[nodiscard]] absl::Status CheckCombineRoutedPairs(
    int64_t base_size, int64_t routed_size, int64_t cols, int64_t rows,
    int64_t top_k, int64_t gates_size, int64_t dst_size);
[[nodiscard]] absl::Status CombineRoutedPairs(
    absl::Span<const float> base, absl::Span<const float> routed, int64_t cols,
    int64_t rows, int64_t top_k, absl::Span<const float> gates, float scale,
    absl::Span<float> dst);

}  // namespace twice::kernels

#endif  // TWICE_KERNELS_TOP_K_ROUTING_H_
