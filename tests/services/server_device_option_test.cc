// --device: "cpu" runs as before; "cuda" is refused at startup with
// UNIMPLEMENTED naming what is missing; anything else is INVALID_ARGUMENT.
#include "gtest/gtest.h"
#include "services/server/server_options.h"

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
  EXPECT_TRUE(WithDevice("cpu").Validate().ok());
}

TEST(ServerDeviceOptionTest, CudaIsRefusedWithWhatIsMissing) {
  const absl::Status status = WithDevice("cuda").Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("device tensors"), absl::string_view::npos)
      << status;
}

TEST(ServerDeviceOptionTest, UnknownDeviceIsInvalid) {
  EXPECT_EQ(WithDevice("gpu").Validate().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twice::services
