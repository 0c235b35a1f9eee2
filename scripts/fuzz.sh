#!/usr/bin/env bash
# Fuzzes Twice's parsers of outside bytes with libFuzzer (tests/fuzz).
#   scripts/fuzz.sh [--seconds N] [--jobs J] [target ...]
# Installs clang (scripts/setup.sh --fuzz), configures build-fuzz/ with
# clang and TWICE_FUZZ=ON (TWICE_FUZZ_BUILD_DIR overrides), builds the
# targets (all of tests/fuzz/*_fuzz.cc by default) and runs each for N
# seconds (default 60) on a scratch copy of tests/fuzz/corpus/<target>, so
# the committed seeds are never rewritten. Exits non-zero when any target
# crashes, leaks or times out, and prints the input that did it (rerun it
# with build-fuzz/tests/fuzz/<target> <input>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
jobs=$(nproc)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for src in "$root"/tests/fuzz/*_fuzz.cc; do
    targets+=("$(basename "$src" .cc)")
  done
fi

"$root/scripts/setup.sh" --fuzz
build_dir=${TWICE_FUZZ_BUILD_DIR:-$root/build-fuzz}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# No RADOS store: no target needs it, and librados 16's buffer.h does not
# compile with clang in C++20 (an ambiguous reversed operator==).
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTWICE_FUZZ=ON \
    -DTWICE_WITH_CUDA=OFF -DTWICE_BUILD_BENCH=OFF -DTWICE_WITH_RADOS=OFF >/dev/null
elif ! grep -q '^TWICE_WITH_RADOS:.*=OFF' "$build_dir/CMakeCache.txt"; then
  cmake "$build_dir" -DTWICE_WITH_RADOS=OFF >/dev/null
fi
cmake --build "$build_dir" --parallel "$jobs" --target "${targets[@]}"

work=$(mktemp -d "${TMPDIR:-/tmp}/twice-fuzz.XXXXXX")
failed=0
for t in "${targets[@]}"; do
  corpus="$work/$t/corpus"
  artifacts="$build_dir/fuzz-artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  cp -r "$root/tests/fuzz/corpus/$t/." "$corpus/" 2>/dev/null || true
  echo "== $t: ${seconds}s, $(find "$corpus" -type f | wc -l) seeds"
  log="$work/$t.log"
  # Run from the source root: targets read models/ and tests/data.
  if (cd "$root" && "$build_dir/tests/fuzz/$t" -max_total_time="$seconds" \
        -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus") >"$log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|new_units_added)|^Done' "$log" | tr '\n' ' '
    echo
  else
    failed=1
    tail -n 40 "$log"
    crash=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | sed 's/Test unit written to //')
    echo "!! $t FAILED; input: ${crash:-(none written; log $log)}"
  fi
done
rm -rf "$work"
exit "$failed"
