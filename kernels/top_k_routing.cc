#include "kernels/top_k_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/check.h"
#include "kernels/status_macros.h"

namespace twice::kernels {
namespace {

// Entries are int32 on every device.
constexpr int64_t kMaxEntries = int64_t{1} << 31;

}  // namespace

absl::StatusOr<TopKRoutes> RouteTopK(absl::Span<const float> logits,
                                     int64_t rows, int64_t experts,
                                     int64_t top_k) {
  constexpr char kOp[] = "RouteTopK";
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && experts >= 1 && 1 <= top_k && top_k <= experts, kOp,
               "need rows >= 0 and 1 <= k <= experts"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows * top_k < kMaxEntries, kOp, "need rows·k < 2^31 entries"));
  TWICE_RETURN_IF_ERROR(CheckSize(
      kOp, "logits", static_cast<int64_t>(logits.size()), rows * experts));
  TopKRoutes routes;
  routes.rows = rows;
  routes.experts = experts;
  routes.top_k = top_k;
  // Each row's k experts (ascending) and gates; then the entries.
  std::vector<int32_t> chosen(static_cast<size_t>(rows * top_k));
  routes.gate.resize(chosen.size());
  std::vector<int64_t> count(static_cast<size_t>(experts), 0);
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::vector<std::pair<int32_t, float>> picked(static_cast<size_t>(top_k));
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * experts;
    // NaN ranks last, so the order stays strict.
    auto key = [l](int32_t e) {
      return std::isnan(l[e]) ? -std::numeric_limits<float>::infinity() : l[e];
    };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&key](int32_t a, int32_t b) {
                        const float ka = key(a), kb = key(b);
                        return ka > kb || (ka == kb && a < b);
                      });
    const float top = l[order[0]];
    double sum = 0.0;
    for (int64_t j = 0; j < top_k; ++j) {
      sum += std::exp(double{l[order[j]]} - top);
    }
    for (int64_t j = 0; j < top_k; ++j) {
      picked[j] = {order[j], static_cast<float>(
                                 std::exp(double{l[order[j]]} - top) / sum)};
    }
    std::sort(picked.begin(), picked.end());
    for (int64_t j = 0; j < top_k; ++j) {
      chosen[r * top_k + j] = picked[j].first;
      routes.gate[r * top_k + j] = picked[j].second;
      ++count[picked[j].first];
    }
  }
  routes.expert_begin.assign(static_cast<size_t>(experts + 1), 0);
  for (int64_t e = 0; e < experts; ++e) {
    routes.expert_begin[e + 1] = routes.expert_begin[e] + count[e];
  }
  std::vector<int64_t> cursor(routes.expert_begin.begin(),
                              routes.expert_begin.end() - 1);
  routes.source_row.resize(chosen.size());
  routes.entry.resize(chosen.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t i = cursor[chosen[r * top_k + j]]++;
      routes.source_row[i] = static_cast<int32_t>(r);
      routes.entry[r * top_k + j] = static_cast<int32_t>(i);
    }
  }
  return routes;
}

absl::Status CheckRoutes(const TopKRoutes& routes) {
  constexpr char kOp[] = "routes";
  const int64_t rows = routes.rows, experts = routes.experts, k = routes.top_k;
  TWICE_RETURN_IF_ERROR(
      CheckArg(rows >= 0 && experts >= 1 && 1 <= k && k <= experts &&
                   rows * k < kMaxEntries,
               kOp, "need rows >= 0, 1 <= k <= experts and rows·k < 2^31"));
  const int64_t n = rows * k;
  TWICE_RETURN_IF_ERROR(CheckSize(
      kOp, "source_row", static_cast<int64_t>(routes.source_row.size()), n));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "entry", static_cast<int64_t>(routes.entry.size()), n));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "gate", static_cast<int64_t>(routes.gate.size()), n));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "expert_begin",
                static_cast<int64_t>(routes.expert_begin.size()), experts + 1));
  bool ok = routes.expert_begin.front() == 0 && routes.expert_begin.back() == n;
  for (int64_t e = 0; ok && e < experts; ++e) {
    ok = routes.expert_begin[e] <= routes.expert_begin[e + 1];
  }
  TWICE_RETURN_IF_ERROR(
      CheckArg(ok, kOp, "expert_begin must rise from 0 to rows·k"));
  std::vector<bool> used(static_cast<size_t>(n), false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = routes.entry[r * k + j];
      if (i < 0 || i >= n || used[i] || routes.source_row[i] != r) {
        return absl::InvalidArgumentError(
            absl::StrCat(kOp, ": entry ", j, " of row ", r, " (", i,
                         ") is out of range, used twice or reads another row"));
      }
      used[i] = true;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGatherRows(int64_t src_size, int64_t cols,
                             absl::Span<const int32_t> source_row,
                             int64_t dst_size) {
  constexpr char kOp[] = "GatherRows";
  TWICE_RETURN_IF_ERROR(CheckArg(cols >= 1, kOp, "need cols >= 1"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(src_size % cols == 0, kOp, "src must hold whole rows"));
  const int64_t n = static_cast<int64_t>(source_row.size());
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "dst", dst_size, n * cols));
  const int64_t src_rows = src_size / cols;
  for (int32_t r : source_row) {
    if (r < 0 || r >= src_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": row ", r, " is outside src's ", src_rows, " rows"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCombineRoutedRows(int64_t base_size, int64_t routed_size,
                                    int64_t cols, const TopKRoutes& routes,
                                    int64_t dst_size) {
  constexpr char kOp[] = "CombineRoutedRows";
  TWICE_RETURN_IF_ERROR(CheckArg(cols >= 1, kOp, "need cols >= 1"));
  TWICE_RETURN_IF_ERROR(CheckRoutes(routes));
  const int64_t rows = routes.rows, k = routes.top_k;
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "base", base_size, rows * cols));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "routed", routed_size, rows * k * cols));
  return CheckSize(kOp, "dst", dst_size, rows * cols);
}

absl::Status GatherRows(absl::Span<const float> src, int64_t cols,
                        absl::Span<const int32_t> source_row,
                        absl::Span<float> dst) {
  TWICE_RETURN_IF_ERROR(CheckGatherRows(static_cast<int64_t>(src.size()), cols,
                                        source_row,
                                        static_cast<int64_t>(dst.size())));
  const int64_t n = static_cast<int64_t>(source_row.size());
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(src.data() + source_row[i] * cols, cols, dst.data() + i * cols);
  }
  return absl::OkStatus();
}

absl::Status CombineRoutedRows(absl::Span<const float> base,
                               absl::Span<const float> routed, int64_t cols,
                               const TopKRoutes& routes, float scale,
                               bool accumulate, absl::Span<float> dst) {
  TWICE_RETURN_IF_ERROR(CheckCombineRoutedRows(
      static_cast<int64_t>(base.size()), static_cast<int64_t>(routed.size()),
      cols, routes, static_cast<int64_t>(dst.size())));
  const int64_t rows = routes.rows, k = routes.top_k;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* entry = routes.entry.data() + r * k;
    const float* gate = routes.gate.data() + r * k;
    for (int64_t c = 0; c < cols; ++c) {
      float sum = base[r * cols + c];
      for (int64_t j = 0; j < k; ++j) {
        sum += gate[j] * routed[entry[j] * cols + c];
      }
      float& out = dst[r * cols + c];
      out = accumulate ? out + scale * sum : scale * sum;
    }
  }
  return absl::OkStatus();
}

absl::Status RouteTopKPairs(absl::Span<const float> logits, int64_t rows,
                            int64_t experts, int64_t top_k,
                            const PaddingRows& padding,
                            absl::Span<float> pair_experts,
                            absl::Span<float> pair_gates) {
  constexpr char kOp[] = "RouteTopKPairs";
  TWICE_RETURN_IF_ERROR(CheckArg(experts < kMaxPairExperts, kOp,
                                 "need experts < 2^24 (exact as floats)"));
  TWICE_RETURN_IF_ERROR(
      CheckArg(padding.row_slots.empty() ||
                   static_cast<int64_t>(padding.row_slots.size()) == rows,
               kOp, "padding rows are known by one slot per row"));
  TWICE_ASSIGN_OR_RETURN(TopKRoutes routes,
                         RouteTopK(logits, rows, experts, top_k));
  const int64_t n = rows * top_k;
  TWICE_RETURN_IF_ERROR(CheckSize(
      kOp, "pair_experts", static_cast<int64_t>(pair_experts.size()), n));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "pair_gates", static_cast<int64_t>(pair_gates.size()), n));
  for (int64_t p = 0; p < n; ++p) {
    // The expert whose block holds the pair's entry.
    const int64_t e =
        std::upper_bound(routes.expert_begin.begin(), routes.expert_begin.end(),
                         routes.entry[p]) -
        routes.expert_begin.begin() - 1;
    const bool pad = !padding.row_slots.empty() &&
                     padding.row_slots[p / top_k] >= padding.first_slot;
    pair_experts[p] = pad ? kNoExpert : static_cast<float>(e);
    pair_gates[p] = pad ? 0.0f : routes.gate[p];
  }
  return absl::OkStatus();
}

absl::Status CheckCombineRoutedPairs(int64_t base_size, int64_t routed_size,
                                     int64_t cols, int64_t rows, int64_t top_k,
                                     int64_t gates_size, int64_t dst_size) {
  constexpr char kOp[] = "CombineRoutedPairs";
  TWICE_RETURN_IF_ERROR(CheckArg(cols >= 1 && rows >= 0 && top_k >= 1, kOp,
                                 "need cols, k >= 1 and rows >= 0"));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "base", base_size, rows * cols));
  TWICE_RETURN_IF_ERROR(
      CheckSize(kOp, "routed", routed_size, rows * top_k * cols));
  TWICE_RETURN_IF_ERROR(CheckSize(kOp, "gates", gates_size, rows * top_k));
  return CheckSize(kOp, "dst", dst_size, rows * cols);
}

absl::Status CombineRoutedPairs(absl::Span<const float> base,
                                absl::Span<const float> routed, int64_t cols,
                                int64_t rows, int64_t top_k,
                                absl::Span<const float> gates, float scale,
                                absl::Span<float> dst) {
  TWICE_RETURN_IF_ERROR(CheckCombineRoutedPairs(
      static_cast<int64_t>(base.size()), static_cast<int64_t>(routed.size()),
      cols, rows, top_k, static_cast<int64_t>(gates.size()),
      static_cast<int64_t>(dst.size())));
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gates.data() + r * top_k;
    for (int64_t c = 0; c < cols; ++c) {
      float sum = base[r * cols + c];
      for (int64_t j = 0; j < top_k; ++j) {
        sum += gate[j] * routed[(r * top_k + j) * cols + c];
      }
      dst[r * cols + c] += scale * sum;
    }
  }
  return absl::OkStatus();
}

}  // namespace twice::kernels
