#!/usr/bin/env bash
# Sets up (Debian packages) and builds Twice into build/ (Release; one
# configuration with tests and benchmarks, so test.sh and run.sh share one
# build tree and run.sh's two programs are reused by test.sh).
#   scripts/build.sh [extra cmake -D options]
#   TWICE_BUILD_TARGETS="twice-server twice" scripts/build.sh
#                                   only those targets (and what they need)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build_dir=${TWICE_BUILD_DIR:-$root/build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE="${TWICE_BUILD_TYPE:-Release}" "$@" >/dev/null
fi
targets=()
for t in ${TWICE_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
