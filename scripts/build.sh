#!/usr/bin/env bash
# Sets up (Debian packages) and builds Twice into build/ (Release, tests and
# benchmarks included so test.sh and run.sh share one build).
#   scripts/build.sh [extra cmake -D options]
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
cmake --build "$build_dir" --parallel "$(nproc)"
