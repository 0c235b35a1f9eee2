// The host executor device's handles (cpu_executor_device.cc): arrays are
// calloc'd host blocks, matrices the loaded tensors themselves, and the
// per-pass tables (slot maps, steps, block tables, routes, expert tables)
// plain host vectors; and the views kernels/ calls take of them.
#ifndef TWICE_ENGINE_EXECUTOR_CPU_DEVICE_ARRAYS_H_
#define TWICE_ENGINE_EXECUTOR_CPU_DEVICE_ARRAYS_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "kernels/paged_attention.h"
#include "kernels/sampling.h"
#include "kernels/tensor.h"
#include "kernels/top_k_routing.h"

namespace twice::engine::cpu_executor {

inline absl::Span<float> Host(DeviceFloats x) {
  return absl::MakeSpan(x.data, static_cast<size_t>(x.size));
}

// calloc'd: a large block comes as untouched zero pages, so a state pool's
// unused slots cost address space, not resident memory.
class HostArray final : public DeviceArray {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceArray>> Create(int64_t floats) {
    void* p = std::calloc(static_cast<size_t>(std::max<int64_t>(floats, 1)),
                          sizeof(float));
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", floats * 4, " bytes"));
    }
    return std::unique_ptr<DeviceArray>(
        new HostArray(static_cast<float*>(p), floats));
  }
  ~HostArray() override { std::free(values_); }
  DeviceFloats floats() const override { return {values_, size_}; }

 private:
  HostArray(float* values, int64_t size) : values_(values), size_(size) {}
  float* values_;
  int64_t size_;
};

class HostMatrix final : public DeviceMatrix {
 public:
  explicit HostMatrix(kernels::Tensor weight) : weight_(std::move(weight)) {}
  int64_t rows() const override { return weight_.dim(0); }
  int64_t cols() const override { return weight_.size() / weight_.dim(0); }
  int64_t bytes() const override { return weight_.ByteSize(); }
  const kernels::Tensor& tensor() const { return weight_; }

 private:
  kernels::Tensor weight_;  // shares the loaded buffer (or view)
};

// The host copies are the map itself.
class HostSlotMap final : public DeviceSlotMap {
 public:
  HostSlotMap(absl::Span<const int32_t> slots,
              absl::Span<const int64_t> positions)
      : DeviceSlotMap(slots, positions) {}
  using DeviceSlotMap::Refill;
};

// A step's buffers in host memory (DeviceStep).
class HostStep final : public DeviceStep {
 public:
  explicit HostStep(int64_t rows)
      : rows_(rows), map_({}, {}), sampled_(static_cast<size_t>(rows), -1) {}
  int64_t rows() const override { return rows_; }
  const DeviceSlotMap& slot_map() const override { return map_; }
  absl::Span<const int32_t> token_ids() const override { return ids_; }

  void Fill(absl::Span<const int32_t> ids, absl::Span<const int32_t> slots,
            absl::Span<const int64_t> positions,
            absl::Span<const kernels::SamplingRule> rules) {
    map_.Refill(slots, positions);
    ids_.assign(ids.begin(), ids.end());
    rules_.assign(rules.begin(), rules.end());
  }
  absl::Span<const kernels::SamplingRule> rules() const { return rules_; }
  absl::Span<int32_t> sampled() { return absl::MakeSpan(sampled_); }
  absl::Span<const int32_t> sampled() const { return sampled_; }

 private:
  const int64_t rows_;
  HostSlotMap map_;
  std::vector<int32_t> ids_;
  std::vector<kernels::SamplingRule> rules_;
  std::vector<int32_t> sampled_;
};

class HostRoutes final : public DeviceRoutes {
 public:
  explicit HostRoutes(kernels::TopKRoutes routes)
      : routes_(std::move(routes)) {}
  const kernels::TopKRoutes& routes() const override { return routes_; }

 private:
  kernels::TopKRoutes routes_;
};

class HostBlockTable final : public DeviceBlockTable {
 public:
  HostBlockTable(absl::Span<const int32_t> blocks, int64_t width)
      : blocks_(blocks.begin(), blocks.end()), width_(width) {}
  absl::Span<const int32_t> blocks() const override { return blocks_; }
  int64_t width() const override { return width_; }
  void set_blocks(std::vector<int32_t> blocks) { blocks_ = std::move(blocks); }

 private:
  std::vector<int32_t> blocks_;
  int64_t width_;
};

class HostMatrixTable final : public DeviceMatrixTable {
 public:
  explicit HostMatrixTable(absl::Span<const DeviceMatrix* const> matrices)
      : matrices_(matrices.begin(), matrices.end()) {}
  int64_t experts() const override {
    return static_cast<int64_t>(matrices_.size());
  }
  int64_t rows() const override { return matrices_[0]->rows(); }
  int64_t cols() const override { return matrices_[0]->cols(); }
  const DeviceMatrix& matrix(int64_t e) const { return *matrices_[e]; }

 private:
  std::vector<const DeviceMatrix*> matrices_;
};

inline kernels::PagedRows PagedRowsOf(const DevicePassRows& rows) {
  return {rows.rows, rows.start,
          rows.step != nullptr ? rows.step->positions()
                               : absl::Span<const int64_t>()};
}

inline const kernels::Tensor& TensorOf(const DeviceMatrix& m) {
  return static_cast<const HostMatrix&>(m).tensor();
}

}  // namespace twice::engine::cpu_executor

#endif  // TWICE_ENGINE_EXECUTOR_CPU_DEVICE_ARRAYS_H_
