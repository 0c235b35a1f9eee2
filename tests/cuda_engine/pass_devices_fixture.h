// The fixture of the CUDA executor device's pass tests
// (cuda_pass_segments_test.cc: the ops over a pass's segments;
// cuda_pass_rows_test.cc: the row form's attention and RAT's scan over
// segments): both devices, values put on both, a pass of segments in
// scattered slots uploaded to both. SKIPPED without a GPU.
#ifndef TWICE_TESTS_CUDA_ENGINE_PASS_DEVICES_FIXTURE_H_
#define TWICE_TESTS_CUDA_ENGINE_PASS_DEVICES_FIXTURE_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_info.h"
#include "kernels/pass_segments.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine::pass_testing {

inline constexpr int64_t kSlots = 8;
// The slots of a pass's segments, in order (UploadPass).
inline constexpr int64_t kScatteredSlots[] = {5, 0, 3, 7, 1, 6, 2, 4};

// Slot s's list of `width` blocks in a pool of kSlots * width: blocks s +
// kSlots * j, last first, so every sequence's blocks lie among the others'.
inline std::vector<int32_t> ScatteredBlocks(int64_t slot, int64_t width) {
  std::vector<int32_t> blocks;
  for (int64_t j = 0; j < width; ++j) {
    blocks.push_back(static_cast<int32_t>(slot + kSlots * (width - 1 - j)));
  }
  return blocks;
}

// The row form's table of a pass of segments of `lengths` rows (in
// kScatteredSlots): each segment's list once per row.
inline std::vector<int32_t> RowTable(const std::vector<int64_t>& lengths,
                                     int64_t width) {
  std::vector<int32_t> table;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const std::vector<int32_t> list =
        ScatteredBlocks(kScatteredSlots[i % kSlots], width);
    for (int64_t r = 0; r < lengths[i]; ++r) {
      table.insert(table.end(), list.begin(), list.end());
    }
  }
  return table;
}

// The same host values on the CUDA and the CPU device.
struct Pair {
  std::unique_ptr<DeviceArray> cuda, cpu;
};

class PassDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_OK_AND_ASSIGN(cuda_, NewCudaExecutorDevice(0));
    cpu_ = NewCpuExecutorDevice();
  }

  // `host` on both devices; with `poison`, the CUDA copy is NaN instead.
  Pair Put(const std::vector<float>& host, bool poison = false) {
    Pair p;
    const int64_t n = static_cast<int64_t>(host.size());
    p.cuda = *cuda_->Allocate(n);
    p.cpu = *cpu_->Allocate(n);
    const std::vector<float> nan(host.size(), NAN);
    EXPECT_OK(cuda_->CopyToDevice(poison ? nan : host, p.cuda->floats()));
    EXPECT_OK(cpu_->CopyToDevice(host, p.cpu->floats()));
    return p;
  }
  // The CUDA copy and the CPU copy.
  std::pair<std::vector<float>, std::vector<float>> Get(const Pair& p) {
    const size_t n = static_cast<size_t>(p.cpu->floats().size);
    std::vector<float> got(n), want(n);
    EXPECT_OK(cuda_->CopyToHost(p.cuda->floats(), absl::MakeSpan(got)));
    EXPECT_OK(cpu_->CopyToHost(p.cpu->floats(), absl::MakeSpan(want)));
    return {got, want};
  }

  // Both devices' uploads of `segments` over `rows` pass rows.
  void Upload(const std::vector<kernels::PassSegment>& segments, int64_t rows) {
    ASSERT_OK_AND_ASSIGN(cuda_segments_,
                         cuda_->UploadPassSegments(segments, rows, kSlots));
    ASSERT_OK_AND_ASSIGN(cpu_segments_,
                         cpu_->UploadPassSegments(segments, rows, kSlots));
  }

  // A pass of segments of `lengths` rows in the scattered slots 5, 0, 3,
  // 7, 1, 6, ...: its row count.
  // The segments start at positions `starts` (0 when not given).
  int64_t UploadPass(const std::vector<int64_t>& lengths,
                     const std::vector<int64_t>& starts = {}) {
    std::vector<kernels::PassSegment> segments;
    int64_t rows = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      segments.push_back({rows, lengths[i], kScatteredSlots[i % kSlots],
                          i < starts.size() ? starts[i] : 0});
      rows += lengths[i];
    }
    Upload(segments, rows);
    return rows;
  }

  // Segment i's own block list (ScatteredBlocks of its slot) as a
  // one-sequence table on the CPU device: what a read by segments uses.
  std::unique_ptr<DeviceBlockTable> CpuTableOfSegment(size_t i, int64_t width) {
    absl::StatusOr<std::unique_ptr<DeviceBlockTable>> table =
        cpu_->UploadBlockTable(ScatteredBlocks(kScatteredSlots[i], width),
                               width);
    EXPECT_OK(table);
    return table.ok() ? *std::move(table) : nullptr;
  }

  std::unique_ptr<ExecutorDevice> cuda_, cpu_;
  std::unique_ptr<DevicePassSegments> cuda_segments_, cpu_segments_;
};

}  // namespace twice::engine::pass_testing

#endif  // TWICE_TESTS_CUDA_ENGINE_PASS_DEVICES_FIXTURE_H_
