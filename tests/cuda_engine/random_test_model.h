// A random-weight model for a GPU test: the preset's shapes, the run's
// seed (TWICE_CUDA_TEST_SEED), written under the temporary directory in a
// folder named for the test and the process.
#ifndef TWICE_TESTS_CUDA_ENGINE_RANDOM_TEST_MODEL_H_
#define TWICE_TESTS_CUDA_ENGINE_RANDOM_TEST_MODEL_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "engine/models/init_model.h"
#include "kernels/status_macros.h"
#include "tests/cuda/cuda_test_util.h"

namespace twice::engine {

// The model's directory; the caller removes it.
inline absl::StatusOr<std::string> WriteRandomTestModel(
    const std::string& folder, const std::string& architecture,
    const std::string& preset) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           (folder + "-" + std::to_string(::getpid())))
                              .string();
  InitModelOptions init;
  init.architecture = architecture;
  init.preset = preset;
  init.out_dir = dir;
  init.seed = kernels::cuda::testing::TestSeed();
  TWICE_RETURN_IF_ERROR(WriteRandomModel(init));
  return dir;
}

}  // namespace twice::engine

#endif  // TWICE_TESTS_CUDA_ENGINE_RANDOM_TEST_MODEL_H_
