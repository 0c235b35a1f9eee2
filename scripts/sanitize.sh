#!/usr/bin/env bash
# Builds the whole tree with AddressSanitizer and UndefinedBehaviorSanitizer
# (TWICE_SANITIZE=ON, gcc) into build-sanitize/ and runs every test there
# with ctest; a finding fails the run (UBSan does not recover, ASan and
# LeakSanitizer exit non-zero). CUDA and the benchmark programs are left
# out: their code has no host paths the tests would reach under ASan.
#   scripts/sanitize.sh [ctest args]     (TWICE_SANITIZE_BUILD_DIR overrides)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build_dir=${TWICE_SANITIZE_BUILD_DIR:-$root/build-sanitize}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# -O1, the optimisation ASan is usually run with: on this tree it halves
# the compile time of the instrumented build (a heavy test file: 80 s at
# -O3, 36 s at -O1), which dominates the sanitizer run on a small machine.
# The test programs that drive servers and stores go to -O0 (their code is
# GoogleTest and gRPC glue; the code they test stays at -O1). The kernels
# and engine programs run as 4 shards each rather than a process per test
# case (tests/CMakeLists.txt, TWICE_TEST_SHARDS): an instrumented process
# start costs more than most of their cases.
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DTWICE_SANITIZE=ON -DTWICE_WITH_CUDA=OFF -DTWICE_BUILD_BENCH=OFF \
  -DTWICE_SERVER_TEST_OPTIMIZE=-O0 -DTWICE_TEST_SHARDS=4 >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
# The server processes tests start inherit these too. Debian's gRPC,
# protobuf and RocksDB are not instrumented; their one-time globals are not
# leaks of ours, hence the suppressions file.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_odr_violation=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0}
cd "$build_dir"
ctest --output-on-failure --parallel "$(nproc)" --timeout 900 "$@"
