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
  return()  # kernels/ needs nothing more
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
