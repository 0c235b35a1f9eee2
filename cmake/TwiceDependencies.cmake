# Third-party packages, all from Debian 12 (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(OpenBLAS CONFIG REQUIRED)      # variables only, no target
add_library(twice_blas INTERFACE)
target_include_directories(twice_blas INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(twice_blas INTERFACE ${OpenBLAS_LIBRARIES})
if(TWICE_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()
if(TWICE_KERNELS_ONLY)
  # kernels/ needs nothing more. The engine comes along when its few
  # packages are present, so the device check can also run whole models on
  # the GPU (tests/cuda_engine) without gRPC or RocksDB.
  find_package(OpenSSL QUIET)
  find_package(nlohmann_json 3.11 CONFIG QUIET)
  find_package(ICU QUIET COMPONENTS uc)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(XXHASH QUIET IMPORTED_TARGET libxxhash)
  endif()
  set(TWICE_KERNELS_ONLY_ENGINE OFF)
  if(OpenSSL_FOUND AND nlohmann_json_FOUND AND ICU_FOUND AND XXHASH_FOUND)
    set(TWICE_KERNELS_ONLY_ENGINE ON)
  endif()
  message(STATUS "Twice kernels-only build with the engine: ${TWICE_KERNELS_ONLY_ENGINE}")
  return()
endif()

find_package(Protobuf REQUIRED)            # module mode: Debian ships no config file
find_package(gRPC CONFIG REQUIRED)
find_package(RocksDB CONFIG REQUIRED)       # link RocksDB::rocksdb-shared, not the 32 MB static archive
find_package(OpenSSL REQUIRED)              # SHA-256 for chain keys and fingerprints
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
find_package(ICU REQUIRED COMPONENTS uc)    # Unicode classes for GPT-2 pre-tokenization
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(prometheus-cpp CONFIG REQUIRED)  # /metrics endpoint of twice-server

if(TWICE_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
