// --device: "cpu" runs as before; "cuda" passes validation and is decided at
// startup: FAILED_PRECONDITION naming why on a build or machine without a
// GPU (a GPU machine runs the CUDA backend: tests/cuda_engine). Anything
// else is INVALID_ARGUMENT. Every --weights_dtype works with either device
// and loads the same way (the CUDA backend keeps projections as bf16 made on
// the GPU), so a state's fingerprint does not depend on the device.
// --executor picks the resident executor (auto: with --device=cuda).
#include "engine/executor/resident_executor.h"
#include "engine/runtime/kernel_device.h"
#include "gtest/gtest.h"
#include "services/server/server.h"
#include "services/server/server_options.h"
#include "tests/testing/grpc_status_matchers.h"

namespace twice::services {
namespace {

ServerOptions WithDevice(const std::string& device) {
  ServerOptions options;
  options.models.push_back({"m", "models/any"});
  options.device = device;
  return options;
}

TEST(ServerDeviceOptionTest, CpuIsTheDefaultAndValid) {
  EXPECT_EQ(ServerOptions().device, "cpu");
  EXPECT_OK(WithDevice("cpu").Validate());
  absl::StatusOr<std::string> name = engine::UseKernelDevice("cpu");
  ASSERT_OK(name);
  EXPECT_EQ(*name, "cpu");
  EXPECT_FALSE(engine::KernelDeviceStats().has_value());
}

TEST(ServerDeviceOptionTest, CudaIsValidAndDecidedAtStartup) {
  EXPECT_OK(WithDevice("cuda").Validate());
  absl::StatusOr<std::string> name = engine::UseKernelDevice("cuda");
  if (name.ok()) {
    // A GPU machine with a CUDA build: the backend is installed.
    EXPECT_EQ(name->rfind("cuda:0", 0), 0u) << *name;
    EXPECT_TRUE(engine::KernelDeviceStats().has_value());
    ASSERT_OK(engine::UseKernelDevice("cpu"));
    GTEST_SKIP() << "a GPU is present: " << *name;
  }
  EXPECT_EQ(name.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(name.status().message().find("--device=cpu"),
            absl::string_view::npos)
      << name.status();
  EXPECT_FALSE(engine::KernelDeviceStats().has_value());
}

TEST(ServerDeviceOptionTest, ServerWithoutGpuRefusesCudaAtStart) {
  ServerOptions options = WithDevice("cuda");
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::string> probe = engine::UseKernelDevice("cuda");
  if (probe.ok()) {
    ASSERT_OK(engine::UseKernelDevice("cpu"));
    GTEST_SKIP() << "a GPU is present";
  }
  absl::StatusOr<std::unique_ptr<TwiceServer>> server =
      TwiceServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition)
      << server.status();
}

TEST(ServerDeviceOptionTest, EveryWeightsDtypeLoadsTheSameOnBothDevices) {
  for (const char* dtype : {"auto", "f32", "bf16", "f16", "int8"}) {
    SCOPED_TRACE(dtype);
    ServerOptions cpu = WithDevice("cpu");
    ServerOptions cuda = WithDevice("cuda");
    cpu.weights_dtype = cuda.weights_dtype = dtype;
    EXPECT_OK(cpu.Validate());
    EXPECT_OK(cuda.Validate());
    EXPECT_EQ(cuda.ModelLoadOptions().weights_dtype,
              cpu.ModelLoadOptions().weights_dtype);
  }
  ServerOptions cuda = WithDevice("cuda");
  EXPECT_FALSE(cuda.ModelLoadOptions().weights_dtype.has_value())
      << "auto keeps the checkpoint's dtype on the GPU too";
  cuda.weights_dtype = "f8";
  EXPECT_EQ(cuda.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerDeviceOptionTest, UnknownDeviceIsInvalid) {
  EXPECT_EQ(WithDevice("gpu").Validate().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine::UseKernelDevice("gpu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServerDeviceOptionTest, ExecutorIsResidentWithCudaByDefault) {
  // auto: the resident executor with --device=cuda, the model's own forward
  // on the cpu; either can be asked for on either device.
  EXPECT_FALSE(WithDevice("cpu").ModelLoadOptions().resident);
  const engine::LoadOptions cuda = WithDevice("cuda").ModelLoadOptions();
  EXPECT_TRUE(cuda.resident);
  EXPECT_EQ(cuda.resident_device, "cuda");
  EXPECT_EQ(cuda.resident_slots, 256);
  ServerOptions cpu_resident = WithDevice("cpu");
  cpu_resident.executor = "resident";
  EXPECT_OK(cpu_resident.Validate());
  EXPECT_TRUE(cpu_resident.ModelLoadOptions().resident);
  EXPECT_EQ(cpu_resident.ModelLoadOptions().resident_device, "cpu");
  ServerOptions cuda_offload = WithDevice("cuda");
  cuda_offload.executor = "offload";
  EXPECT_FALSE(cuda_offload.ModelLoadOptions().resident);

  ServerOptions bad = WithDevice("cpu");
  bad.executor = "gpu";
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  bad = WithDevice("cpu");
  bad.resident_slots = 8;  // under one decode batch
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerDeviceOptionTest, SharedPrefillPassesAreOnUnlessTurnedOff) {
  ServerOptions resident = WithDevice("cpu");
  resident.executor = "resident";
  EXPECT_TRUE(resident.ModelLoadOptions().resident_share_prefill_passes);
  resident.resident_share_prefill_passes = false;
  EXPECT_FALSE(resident.ModelLoadOptions().resident_share_prefill_passes);
}

TEST(ServerDeviceOptionTest, PrefillChunkFollowsTheDeviceUnlessGiven) {
  // 0 (the default) leaves the pass length to the loader, which picks by
  // device (engine/executor/resident_executor.h): a GPU wants longer
  // passes than the CPU.
  EXPECT_EQ(WithDevice("cuda").ModelLoadOptions().resident_prefill_chunk, 0);
  EXPECT_EQ(engine::ResidentPrefillChunk(WithDevice("cuda").ModelLoadOptions()),
            engine::kCudaPrefillChunk);
  ServerOptions cpu_resident = WithDevice("cpu");
  cpu_resident.executor = "resident";
  EXPECT_EQ(engine::ResidentPrefillChunk(cpu_resident.ModelLoadOptions()),
            engine::kCpuPrefillChunk);
  EXPECT_LT(engine::kCpuPrefillChunk, engine::kCudaPrefillChunk);
  ServerOptions given = WithDevice("cuda");
  given.resident_prefill_chunk = 1024;
  EXPECT_OK(given.Validate());
  EXPECT_EQ(given.ModelLoadOptions().resident_prefill_chunk, 1024);
  EXPECT_EQ(engine::ResidentPrefillChunk(given.ModelLoadOptions()), 1024);
  // The loader refuses a negative length however it is called.
  engine::LoadOptions negative;
  negative.resident_prefill_chunk = -1;
  EXPECT_EQ(engine::LoadModel("models/any", negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const int64_t bad : {int64_t{-1}, int64_t{65537}}) {
    ServerOptions options = WithDevice("cuda");
    options.resident_prefill_chunk = bad;
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("--resident_prefill_chunk"),
              absl::string_view::npos)
        << status;
  }
}

}  // namespace
}  // namespace twice::services
