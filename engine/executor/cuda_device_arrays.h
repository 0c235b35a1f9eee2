// The CUDA executor device's handles (cuda_executor_device.h): arrays and
// bf16 matrices in blocks of its allocator, and the per-pass tables (slot
// maps, block tables, routes) as one device block each with the host copy
// the checks read; and the views the cuda_ops.h calls take of them.
#ifndef TWICE_ENGINE_EXECUTOR_CUDA_DEVICE_ARRAYS_H_
#define TWICE_ENGINE_EXECUTOR_CUDA_DEVICE_ARRAYS_H_

#if TWICE_HAVE_CUDA
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/top_k_routing.h"

namespace twice::engine::cuda_executor {

namespace cuda = ::twice::kernels::cuda;

inline int64_t FloatBytes(int64_t floats) {
  return floats * static_cast<int64_t>(sizeof(float));
}

inline cuda::DeviceSpan<float> Span(DeviceFloats x) { return {x.data, x.size}; }
inline cuda::DeviceSpan<const float> ConstSpan(DeviceFloats x) {
  return {x.data, x.size};
}

class CudaArray final : public DeviceArray {
 public:
  explicit CudaArray(cuda::DeviceBuffer buffer, int64_t floats)
      : buffer_(std::move(buffer)), floats_(floats) {}
  DeviceFloats floats() const override {
    return {static_cast<float*>(buffer_.data()), floats_};
  }

 private:
  cuda::DeviceBuffer buffer_;
  int64_t floats_;
};

// A bf16 matrix [rows, cols] stored with its rows padded by zero rows to a
// multiple of 8 (padded_rows), the row counts cuBLASLt's bf16 GEMMs take:
// a vocabulary of 50257 is a head of 50264 rows whose last 7 outputs are
// dropped (CudaExecutorDevice::Linear).
class CudaMatrix final : public DeviceMatrix {
 public:
  static constexpr int64_t kRowMultiple = 8;
  static int64_t PaddedRows(int64_t rows) {
    return (rows + kRowMultiple - 1) / kRowMultiple * kRowMultiple;
  }

  CudaMatrix(cuda::DeviceBuffer bf16, int64_t rows, int64_t cols)
      : bf16_(std::move(bf16)), rows_(rows), cols_(cols) {}
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  int64_t bytes() const override { return padded_rows() * cols_ * 2; }
  int64_t padded_rows() const { return PaddedRows(rows_); }
  // [padded_rows, cols], what a GEMM reads.
  cuda::DeviceSpan<const cuda::Bf16> padded_values() const {
    return {static_cast<const cuda::Bf16*>(bf16_.data()),
            padded_rows() * cols_};
  }
  // [rows, cols], what a row gather reads.
  cuda::DeviceSpan<const cuda::Bf16> values() const {
    return {static_cast<const cuda::Bf16*>(bf16_.data()), rows_ * cols_};
  }

 private:
  cuda::DeviceBuffer bf16_;  // [padded_rows, cols]
  int64_t rows_;
  int64_t cols_;
};

// The experts' bf16 matrices of one routed product as a device array of
// pointers (cuda::RoutedWeights); the matrices stay their layer's.
class CudaMatrixTable final : public DeviceMatrixTable {
 public:
  CudaMatrixTable(int64_t experts, int64_t rows, int64_t cols,
                  cuda::DeviceBuffer pointers)
      : experts_(experts),
        rows_(rows),
        cols_(cols),
        pointers_(std::move(pointers)) {}
  int64_t experts() const override { return experts_; }
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  cuda::RoutedWeights weights() const {
    return {{static_cast<const cuda::Bf16* const*>(pointers_.data()), experts_},
            experts_,
            rows_,
            cols_};
  }

 private:
  int64_t experts_, rows_, cols_;
  cuda::DeviceBuffer pointers_;  // [experts] const Bf16*
};

// Slots and positions in one device block: [rows] int64 positions, then
// [rows] int32 slots.
// Refill keeps the row count: the block was uploaded with the new values.
class CudaSlotMap final : public DeviceSlotMap {
 public:
  CudaSlotMap(absl::Span<const int32_t> slots,
              absl::Span<const int64_t> positions, cuda::DeviceBuffer device)
      : DeviceSlotMap(slots, positions), device_(std::move(device)) {}
  using DeviceSlotMap::Refill;  // after an upload of the same row count
  void* block() const { return device_.data(); }
  cuda::DeviceSlotRows rows() const {
    return {slots(),
            {reinterpret_cast<const int32_t*>(device_positions() +
                                              positions().size()),
             static_cast<int64_t>(slots().size())}};
  }
  cuda::DeviceSpan<const int64_t> device_positions_span() const {
    return {device_positions(), static_cast<int64_t>(positions().size())};
  }

 private:
  const int64_t* device_positions() const {
    return static_cast<const int64_t*>(device_.data());
  }
  cuda::DeviceBuffer device_;
};

// A prefill pass's segments with their device copy: four int64 per
// segment (first_row, rows, slot, start), as the *Segments kernels read
// them.
class CudaPassSegments final : public DevicePassSegments {
 public:
  CudaPassSegments(absl::Span<const kernels::PassSegment> segments,
                   int64_t rows, cuda::DeviceBuffer device)
      : DevicePassSegments(segments, rows), device_(std::move(device)) {}
  cuda::DevicePassSegments view() const {
    return {segments(),
            {static_cast<const int64_t*>(device_.data()),
             4 * static_cast<int64_t>(segments().size())}};
  }

 private:
  cuda::DeviceBuffer device_;
};

// A decode step's buffers (DeviceStep) in one device block that stays put:
// the slot map's [rows] int64 positions and [rows] int32 slots first (a
// CudaSlotMap over the block, so the slot-indexed operations read it as
// any), then [rows] int32 token ids, the rules' device form from a 16-byte
// boundary, and [rows] int32 sampled ids.
class CudaStep final : public DeviceStep {
 public:
  static int64_t IdsOffset(int64_t rows) { return rows * 12; }
  static int64_t RulesOffset(int64_t rows) {
    return (rows * 16 + 15) / 16 * 16;
  }
  static int64_t SampledOffset(int64_t rows) {
    return RulesOffset(rows) + rows * cuda::DeviceSamplingRuleBytes();
  }
  static int64_t BlockBytes(int64_t rows) {
    return SampledOffset(rows) + rows * 4;
  }

  CudaStep(int64_t rows, cuda::DeviceBuffer block)
      : map_(std::vector<int32_t>(static_cast<size_t>(rows)),
             std::vector<int64_t>(static_cast<size_t>(rows)), std::move(block)),
        rows_(rows) {}
  int64_t rows() const override { return rows_; }
  const DeviceSlotMap& slot_map() const override { return map_; }
  absl::Span<const int32_t> token_ids() const override { return ids_; }

  void Refill(absl::Span<const int32_t> ids, absl::Span<const int32_t> slots,
              absl::Span<const int64_t> positions) {
    map_.Refill(slots, positions);
    ids_.assign(ids.begin(), ids.end());
  }
  char* block() const { return static_cast<char*>(map_.block()); }
  cuda::DeviceSpan<const int32_t> device_ids() const {
    return {reinterpret_cast<const int32_t*>(block() + IdsOffset(rows_)),
            rows_};
  }
  const void* device_rules() const { return block() + RulesOffset(rows_); }
  cuda::DeviceSpan<int32_t> device_sampled() const {
    return {reinterpret_cast<int32_t*>(block() + SampledOffset(rows_)), rows_};
  }

 private:
  CudaSlotMap map_;
  const int64_t rows_;
  std::vector<int32_t> ids_;  // host copy; empty until filled
};

// A block table's entries on the device, with the host copy the checks
// read.
class CudaBlockTable final : public DeviceBlockTable {
 public:
  CudaBlockTable(absl::Span<const int32_t> blocks, int64_t width,
                 cuda::DeviceBuffer device)
      : blocks_(blocks.begin(), blocks.end()),
        width_(width),
        device_(std::move(device)) {}
  absl::Span<const int32_t> blocks() const override { return blocks_; }
  int64_t width() const override { return width_; }
  void set_blocks(std::vector<int32_t> blocks) { blocks_ = std::move(blocks); }
  void* device_data() const { return device_.data(); }
  cuda::DeviceBlockTableView view() const {
    return {blocks_,
            {static_cast<const int32_t*>(device_.data()),
             static_cast<int64_t>(blocks_.size())}};
  }

 private:
  std::vector<int32_t> blocks_;
  int64_t width_;
  cuda::DeviceBuffer device_;
};

// A pass's routes on the device in one block: [n] int32 source rows,
// [n] int32 entries, [n] float gates (n = rows·k), with the host copy.
class CudaRoutes final : public DeviceRoutes {
 public:
  CudaRoutes(kernels::TopKRoutes routes, cuda::DeviceBuffer device)
      : routes_(std::move(routes)), device_(std::move(device)) {}
  const kernels::TopKRoutes& routes() const override { return routes_; }
  cuda::DeviceRoutesView view() const {
    const int64_t n = static_cast<int64_t>(routes_.source_row.size());
    const auto* ints = static_cast<const int32_t*>(device_.data());
    return {&routes_,
            {ints, n},
            {ints + n, n},
            {reinterpret_cast<const float*>(ints + 2 * n), n}};
  }

 private:
  kernels::TopKRoutes routes_;
  cuda::DeviceBuffer device_;
};

// Adds the time from its creation to its end to traffic.host_wait_ns:
// around the calls that block the host on the device.
class HostWaitTimer {
 public:
  explicit HostWaitTimer(DeviceTraffic& traffic)
      : traffic_(traffic), start_(std::chrono::steady_clock::now()) {}
  ~HostWaitTimer() {
    traffic_.host_wait_ns +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - start_)
            .count();
  }
  HostWaitTimer(const HostWaitTimer&) = delete;
  HostWaitTimer& operator=(const HostWaitTimer&) = delete;

 private:
  DeviceTraffic& traffic_;
  const std::chrono::steady_clock::time_point start_;
};

inline const CudaMatrix& MatrixOf(const DeviceMatrix& m) {
  return static_cast<const CudaMatrix&>(m);
}

inline cuda::DeviceSlotRows SlotRowsOf(const DeviceSlotMap& m) {
  return static_cast<const CudaSlotMap&>(m).rows();
}

inline cuda::DevicePagedRows CudaPagedRowsOf(const DevicePassRows& rows) {
  cuda::DevicePagedRows out{rows.rows, rows.start, {}, {}};
  if (rows.step != nullptr) {
    const auto& map = static_cast<const CudaSlotMap&>(*rows.step);
    out.positions_host = map.positions();
    out.positions_device = map.device_positions_span();
  }
  return out;
}

}  // namespace twice::engine::cuda_executor

#endif  // TWICE_HAVE_CUDA
#endif  // TWICE_ENGINE_EXECUTOR_CUDA_DEVICE_ARRAYS_H_
