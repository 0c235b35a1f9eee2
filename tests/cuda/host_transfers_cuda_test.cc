// Host <-> device transfers through page-locked memory: UploadRing (a
// stream's uploads that do not wait for its queued work) and HostDownloads
// (many device-to-host copies on a copy stream with one wait). Small ring
// and staging limits make every test wrap, grow and split: the bugs these
// classes can have are a staging region reused while a transfer still
// reads it, a copy that runs before the work writing its source, and an
// upload that drains the stream after all. Every check is exact (bytes
// are only moved). SKIPPED without a GPU; the device stream's state
// (cudaStreamQuery) and the classes' wait counters show the device ran.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/host_downloads.h"
#include "kernels/cuda/upload_ring.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::kernels::cuda {
namespace {

using testing::CudaTest;
using testing::TestSeed;

constexpr int64_t kSmallLimit = 4096;

std::vector<uint8_t> RandomBytes(int64_t n, uint32_t salt) {
  std::mt19937 rng(TestSeed() * 2654435761u + salt);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& b : v) b = static_cast<uint8_t>(byte(rng));
  return v;
}

// Queues `rounds` memsets of `buffer` (tens of milliseconds of device work
// for a 256 MiB buffer) to `value`, so the stream is still busy when the
// call under test returns.
void KeepBusy(const Stream& stream, DeviceBuffer& buffer, int value,
              int rounds = 40) {
  for (int i = 0; i < rounds; ++i) {
    ASSERT_EQ(
        cudaMemsetAsync(buffer.data(), value,
                        static_cast<size_t>(buffer.bytes()), stream.get()),
        cudaSuccess);
  }
}

using UploadRingTest = CudaTest;

TEST_F(UploadRingTest, UploadsLandInOrderThoughTheRingWrapsAndGrows) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<UploadRing> ring,
                       UploadRing::Create(stream_->get(), kSmallLimit));
  const int64_t total = 300 * 1000;
  DeviceBuffer device = Zeros<uint8_t>(total);
  std::vector<uint8_t> want(static_cast<size_t>(total), 0);
  std::mt19937 rng(TestSeed());
  std::uniform_int_distribution<int64_t> size(1, 3000);
  std::vector<uint8_t> source;
  int64_t at = 0;
  for (uint32_t round = 0; at < total; ++round) {
    const int64_t n = std::min(size(rng), total - at);
    source = RandomBytes(n, round);
    std::memcpy(want.data() + at, source.data(), static_cast<size_t>(n));
    ASSERT_OK(
        ring->Upload(source.data(), static_cast<char*>(device.data()) + at, n));
    // The ring copied the bytes already: the caller's memory is free.
    std::fill(source.begin(), source.end(), uint8_t{0xAB});
    // Every third region is written twice: the later upload wins.
    if (round % 3 == 0) {
      const std::vector<uint8_t> again = RandomBytes(n, 100000 + round);
      std::memcpy(want.data() + at, again.data(), static_cast<size_t>(n));
      ASSERT_OK(ring->Upload(again.data(),
                             static_cast<char*>(device.data()) + at, n));
    }
    at += n;
  }
  EXPECT_EQ(Get<uint8_t>(device), want);
  EXPECT_EQ(ring->capacity(), kSmallLimit);
  EXPECT_GT(ring->waits(), 50);  // it wrapped (about 400 KB through 4 KiB)
}

// A ring of up to 4 MiB grows 1 -> 2 -> 4 MiB while the stream is busy
// and earlier transfers are still queued: each growth waits for them
// before the old memory goes, so every byte still lands.
TEST_F(UploadRingTest, ItGrowsWithTransfersStillQueued) {
  const int64_t max_bytes = int64_t{4} << 20;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<UploadRing> ring,
                       UploadRing::Create(stream_->get(), max_bytes));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer busy,
                       allocator_->Allocate(int64_t{256} << 20));
  const int64_t piece = 300000, pieces = 30;  // 9 MB through the ring
  DeviceBuffer device = Zeros<uint8_t>(piece * pieces);
  ASSERT_OK(stream_->Synchronize());
  std::vector<uint8_t> want;
  for (int64_t i = 0; i < pieces; ++i) {
    if (i % 10 == 0) KeepBusy(*stream_, busy, static_cast<int>(i));
    const std::vector<uint8_t> host =
        RandomBytes(piece, 500 + static_cast<uint32_t>(i));
    want.insert(want.end(), host.begin(), host.end());
    ASSERT_OK(ring->Upload(
        host.data(), static_cast<char*>(device.data()) + i * piece, piece));
  }
  EXPECT_EQ(Get<uint8_t>(device), want);
  EXPECT_EQ(ring->capacity(), max_bytes);
  EXPECT_GE(ring->waits(), 2);  // at least the two growths
}

TEST_F(UploadRingTest, AnUploadLargerThanTheRingGoesInPieces) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<UploadRing> ring,
                       UploadRing::Create(stream_->get(), kSmallLimit));
  const std::vector<uint8_t> host = RandomBytes(100003, 1);
  DeviceBuffer device = Zeros<uint8_t>(100003);
  ASSERT_OK(ring->Upload(host.data(), device.data(), 100003));
  EXPECT_EQ(Get<uint8_t>(device), host);
  EXPECT_GE(ring->waits(), 100003 / kSmallLimit - 1);
}

TEST_F(UploadRingTest, AnUploadDoesNotWaitForTheStreamsQueuedWork) {
  ASSERT_OK_AND_ASSIGN(DeviceBuffer busy,
                       allocator_->Allocate(int64_t{256} << 20));
  const std::vector<uint8_t> host = RandomBytes(1000, 2);
  DeviceBuffer device = Zeros<uint8_t>(1000);
  ASSERT_OK(stream_->Synchronize());
  KeepBusy(*stream_, busy, 1);
  // Through the stream's own ring, as every executor upload goes.
  ASSERT_OK(stream_->Upload(host.data(), device.data(), 1000));
  // A synchronous copy would have waited for the memsets ahead of it.
  EXPECT_EQ(cudaStreamQuery(stream_->get()), cudaErrorNotReady);
  EXPECT_EQ(Get<uint8_t>(device), host);
}

TEST_F(UploadRingTest, BadArgumentsAreRefused) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<UploadRing> ring,
                       UploadRing::Create(stream_->get(), kSmallLimit));
  uint8_t byte = 0;
  EXPECT_EQ(ring->Upload(&byte, nullptr, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring->Upload(&byte, &byte, -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_OK(ring->Upload(nullptr, nullptr, 0));
  EXPECT_EQ(UploadRing::Create(stream_->get(), 8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

using HostDownloadsTest = CudaTest;

TEST_F(HostDownloadsTest, CopiesWaitForTheWorkQueuedOnTheComputingStream) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HostDownloads> downloads,
                       HostDownloads::Create(0, kSmallLimit));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer busy,
                       allocator_->Allocate(int64_t{256} << 20));
  ASSERT_EQ(cudaMemsetAsync(busy.data(), 0, static_cast<size_t>(busy.bytes()),
                            stream_->get()),
            cudaSuccess);
  ASSERT_OK(stream_->Synchronize());
  KeepBusy(*stream_, busy, 0x5C);
  // The last 100 KB of the buffer, the first 3 bytes and an empty copy:
  // each as the memsets queued before leave it, never the zeros before.
  std::vector<uint8_t> tail(100000), head(3);
  const char* base = static_cast<const char*>(busy.data());
  const HostDownloads::Copy copies[] = {
      {base + busy.bytes() - 100000, tail.data(), 100000},
      {base, head.data(), 3},
      {base, nullptr, 0}};
  ASSERT_OK(downloads->CopyAll(*stream_, copies));
  EXPECT_EQ(tail, std::vector<uint8_t>(100000, 0x5C));
  EXPECT_EQ(head, std::vector<uint8_t>(3, 0x5C));
  // 100 KB through 4 KiB of staging: a wait per staging's worth.
  EXPECT_GE(downloads->waits(), 100000 / kSmallLimit);
  EXPECT_EQ(downloads->staging_bytes(), kSmallLimit);
}

TEST_F(HostDownloadsTest, ManyCopiesOfMixedSizesLandInTheirDestinations) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HostDownloads> downloads,
                       HostDownloads::Create(0, kSmallLimit));
  std::mt19937 rng(TestSeed() + 7);
  std::uniform_int_distribution<int64_t> size(0, 9000);
  std::vector<std::vector<uint8_t>> want, got;
  std::vector<DeviceBuffer> sources;
  std::vector<HostDownloads::Copy> copies;
  for (uint32_t i = 0; i < 60; ++i) {
    want.push_back(RandomBytes(size(rng), 200 + i));
    sources.push_back(Put(want.back()));
    got.emplace_back(want.back().size(), uint8_t{0});
  }
  for (size_t i = 0; i < want.size(); ++i) {
    copies.push_back({sources[i].data(), got[i].data(),
                      static_cast<int64_t>(want[i].size())});
  }
  ASSERT_OK(downloads->CopyAll(*stream_, copies));
  EXPECT_EQ(got, want);
  // Twice through the same staging: nothing of the first batch remains.
  for (auto& g : got) std::fill(g.begin(), g.end(), uint8_t{0});
  ASSERT_OK(downloads->CopyAll(*stream_, copies));
  EXPECT_EQ(got, want);
}

TEST_F(HostDownloadsTest, BadCopiesAreRefusedBeforeAnyCopy) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<HostDownloads> downloads,
                       HostDownloads::Create(0, kSmallLimit));
  DeviceBuffer source = Put(RandomBytes(16, 3));
  std::vector<uint8_t> host(16, 0);
  const HostDownloads::Copy copies[] = {{source.data(), host.data(), 16},
                                        {source.data(), nullptr, 4}};
  EXPECT_EQ(downloads->CopyAll(*stream_, copies).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host, std::vector<uint8_t>(16, 0));
  EXPECT_EQ(HostDownloads::Create(0, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::kernels::cuda
