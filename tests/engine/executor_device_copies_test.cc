// ExecutorDevice::CopyAllToHost on the CPU device: several views (one of
// them empty) land in their host memory in one call, and a copy whose
// sizes differ is refused before anything is copied (a saved state is
// never half written by a bad plan). The CUDA device's twin is in
// tests/cuda_engine/cuda_executor_device_test.cc.
#include <memory>
#include <vector>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

TEST(ExecutorDeviceCopiesTest, EveryCopyLandsAndIsCounted) {
  std::unique_ptr<ExecutorDevice> device = NewCpuExecutorDevice();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> a, device->Allocate(10));
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT_OK(device->CopyToDevice(values, a->floats()));
  std::vector<float> head(3), tail(4);
  const HostCopy copies[] = {{a->floats().sub(0, 3), absl::MakeSpan(head)},
                             {a->floats().sub(3, 0), {}},
                             {a->floats().sub(6, 4), absl::MakeSpan(tail)}};
  const int64_t before = device->traffic().bytes_to_host;
  ASSERT_OK(device->CopyAllToHost(copies));
  EXPECT_EQ(head, std::vector<float>({1, 2, 3}));
  EXPECT_EQ(tail, std::vector<float>({7, 8, 9, 10}));
  EXPECT_EQ(device->traffic().bytes_to_host - before, 7 * 4);
}

TEST(ExecutorDeviceCopiesTest, AMismatchedCopyIsRefusedBeforeAnyCopy) {
  std::unique_ptr<ExecutorDevice> device = NewCpuExecutorDevice();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> a, device->Allocate(8));
  ASSERT_OK(device->CopyToDevice(std::vector<float>(8, 1.0f), a->floats()));
  std::vector<float> first(4, -1.0f), second(3, -1.0f);
  const HostCopy copies[] = {{a->floats().sub(0, 4), absl::MakeSpan(first)},
                             {a->floats().sub(4, 4), absl::MakeSpan(second)}};
  const absl::Status s = device->CopyAllToHost(copies);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("copy 1 of 2"), std::string::npos) << s;
  EXPECT_EQ(first, std::vector<float>(4, -1.0f));
  EXPECT_EQ(device->traffic().bytes_to_host, 0);
}

}  // namespace
}  // namespace twice::engine
