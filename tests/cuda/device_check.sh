#!/usr/bin/env bash
# The CUDA device check: on a machine with an NVIDIA GPU, builds the CUDA
# targets (kernels-only configure, Release, no ccache, one job per core),
# runs every CUDA-vs-CPU test on fresh random inputs (bf16 paths <= 1e-2
# relative error, TF32 tensor-core products <= 3e-3, f32 <= 1e-5), times the
# prefill table (Based and JRT-RNN layers at batch 16 x {2k, 8k, 16k, 32k},
# the in-repo flash-style softmax attention, Based's window attention, the
# Mamba-2 SSD scan in its forms, PyTorch SDPA when torch with CUDA is
# present) and, when the engine is
# built, the engine's own models on the GPU (cuda_engine_bench: prefill,
# decode, host <-> device bytes), and writes the table to $OUT/ (with the
# logs, one archive) when OUT is set, else to bench/results/cuda_<date>.md.
#
#   tests/cuda/device_check.sh            (from anywhere; at most 5.5 minutes)
#   TWICE_CUDA_TEST_SEED=123 ...          reproduce a test run's inputs
#   TWICE_DEVICE_BUDGET_S=600 ...         the whole run's limit (default 330 s:
#                                         every step gets what is left of it,
#                                         and a step with too little is
#                                         skipped and says so)
#   TWICE_COMMIT=abc123 ...               the commit the table names (a tree
#                                         copied without .git knows none)
#   TWICE_DEVICE_QUICK=1 ...              tokens 2048,8192 only, short model
#                                         rows
#   TWICE_DEVICE_USE_DEBS=1 ...           build against .device-debs/ (see
#                                         tests/cuda/fetch_device_debs.sh)
#   TWICE_DEVICE_JOBS=4 ...               build jobs (default: one per core)
#   TWICE_DEVICE_BUILD_S=1800 ...         the build step's limit (default 240 s;
#                                         a machine with few cores needs more,
#                                         with TWICE_DEVICE_BUDGET_S raised to
#                                         match: no step outlasts the budget)
#
# Exit status: 0 when every test passed and the bench ran, 1 otherwise, 77
# when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
start=$(date +%s)
deadline=$((start + ${TWICE_DEVICE_BUDGET_S:-330}))
build="${TWICE_DEVICE_BUILD:-$root/build-device}"
log() { echo "[device_check $(($(date +%s) - start))s] $*" >&2; }
# limit SECONDS: SECONDS, or less when the budget has less left (15 s kept
# for writing the results); never below 1 (timeout 0 would mean no limit).
limit() {
  local left=$((deadline - $(date +%s) - 15))
  [ "$left" -lt 1 ] && left=1
  echo $(($1 < left ? $1 : left))
}
# has_time SECONDS: whether a step that needs at least SECONDS still fits.
has_time() { [ "$(limit "$1")" -ge "$1" ]; }
# Every log travels with the table when it goes to $OUT, as one archive (a
# results folder may bring back only a few files), however the run ends.
archive_logs() {
  [ -n "${OUT:-}" ] || return 0
  mkdir -p "$OUT"
  tar -czf "$OUT/device_check_logs.tgz" -C "$(dirname "$build")" \
    $(cd "$(dirname "$build")" && ls -d "$(basename "$build")".*.log \
      "$(basename "$build")".sdpa.txt 2>/dev/null) 2>/dev/null || true
}
trap archive_logs EXIT
# ccache off: a fresh machine has no cache, and CMake would look for ccache
# again whatever TWICE_CCACHE says.
export CCACHE_DISABLE=1

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device_check: no NVIDIA GPU visible (nvidia-smi -L failed): skipped"
  exit 77
fi
gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
arch="${TWICE_CUDA_ARCH:-${cap:-90}}"
log "GPU: $gpu (building for sm_$arch)"

# ---- 1. toolchain: install only what is missing (Debian/Ubuntu) -------------
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "device_check: nvcc not found (install the CUDA toolkit)" >&2
  exit 1
fi
# The tools the carried packages do not bring: without them nothing builds.
tools_missing=()
command -v cmake >/dev/null || tools_missing+=(cmake)
command -v ninja >/dev/null || tools_missing+=(ninja-build)
command -v g++ >/dev/null || tools_missing+=(g++)
missing=()
[ -f /usr/include/absl/status/status.h ] || missing+=(libabsl-dev)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev libgmock-dev)
openblas=""
for f in /usr/lib/*/cmake/openblas/OpenBLASConfig.cmake \
         /usr/lib/*/openblas*/cmake/openblas/OpenBLASConfig.cmake \
         /usr/lib/cmake/openblas/OpenBLASConfig.cmake; do
  [ -f "$f" ] && openblas="$f"
done
[ -n "$openblas" ] || missing+=(libopenblas-dev)
# The engine's packages are optional: with them the check also runs whole
# models on the GPU (cuda_model_test, resident_executor_cuda_test).
engine_missing=()
[ -f /usr/include/nlohmann/json.hpp ] || engine_missing+=(nlohmann-json3-dev)
[ -f /usr/include/openssl/sha.h ] || engine_missing+=(libssl-dev)
[ -f /usr/include/unicode/uchar.h ] || engine_missing+=(libicu-dev)
[ -f /usr/include/xxhash.h ] || engine_missing+=(libxxhash-dev)
command -v pkg-config >/dev/null || engine_missing+=(pkg-config)
# A machine that cannot fetch packages: the .deb files of
# tests/cuda/fetch_device_debs.sh, carried in .device-debs/, are unpacked
# into a private prefix beside the build (never into /) and CMake, the
# loader and pkg-config are pointed at it.
deps_args=()
debs=("$root"/.device-debs/*.deb)
# TWICE_DEVICE_USE_DEBS=1 uses them even when the system has the packages.
if { [ -n "${TWICE_DEVICE_USE_DEBS:-}" ] ||
     [ $((${#missing[@]} + ${#engine_missing[@]})) -gt 0 ]; } &&
   [ -f "${debs[0]}" ]; then
  prefix="$build.deps"
  log "unpacking ${#debs[@]} carried packages into $prefix"
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else
      tmp=$(mktemp -d) && (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix")
      rm -rf "$tmp"
    fi
  done
  lib="$prefix/usr/lib/x86_64-linux-gnu"
  # OpenBLAS's CMake file names absolute /usr paths; the others are relocatable.
  for f in "$lib"/cmake/openblas/OpenBLASConfig.cmake \
           "$lib"/openblas-pthread/cmake/openblas/OpenBLASConfig.cmake; do
    [ -f "$f" ] && sed -i "s|/usr/|$prefix/usr/|g" "$f"
  done
  deps_args=(-DCMAKE_PREFIX_PATH="$prefix/usr" -Dabsl_DIR="$lib/cmake/absl"
             -DGTest_DIR="$lib/cmake/GTest"
             -DOpenBLAS_DIR="$lib/openblas-pthread/cmake/openblas"
             -Dnlohmann_json_DIR="$prefix/usr/share/cmake/nlohmann_json"
             -DICU_ROOT="$prefix/usr" -DOPENSSL_ROOT_DIR="$prefix/usr")
  export PATH="$prefix/usr/bin:$PATH"
  export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$prefix"
  export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  missing=()
  engine_missing=()
fi
missing+=("${tools_missing[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  # Short limits: a machine without a network fails here fast.
  timeout 60 "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=30 update -qq &&
    DEBIAN_FRONTEND=noninteractive timeout 180 "${sudo_cmd[@]}" apt-get \
      -o DPkg::Lock::Timeout=30 install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null ||
    { echo "device_check: could not install ${missing[*]}; on a machine" \
        "that cannot fetch packages, run tests/cuda/fetch_device_debs.sh" \
        "where it can and carry .device-debs" >&2; exit 1; }
fi

if [ ${#engine_missing[@]} -gt 0 ]; then
  log "installing ${engine_missing[*]} (optional: whole-model check)"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive timeout 60 "${sudo_cmd[@]}" apt-get \
    -o DPkg::Lock::Timeout=30 install -y -qq --no-install-recommends \
    "${engine_missing[@]}" >/dev/null 2>&1 ||
    log "could not install them: the whole-model check is skipped"
fi

# ---- 2. build the CUDA targets only ----------------------------------------------
# The tools and compilers this machine has, for the log (a build error on an
# unfamiliar compiler is read against them).
{ g++ --version | head -1; cmake --version | head -1; "$nvcc" --version | tail -1
  ldconfig -p 2>/dev/null | grep -m1 cublasLt || echo "libcublasLt: not in ldconfig"
} >"$build.tools.log" 2>&1
cat "$build.tools.log" >&2
# Every CUDA test file is its own program (no unity build): the loop below
# runs each, so a test file added later is run without editing this list.
tests=(cuda_device_info_test)
for f in "$root"/tests/cuda/*_test.cc; do tests+=("$(basename "$f" .cc)"); done
log "configure"
# Warnings stay warnings here: another compiler version may warn where
# Debian's gcc does not, and that must not cost the device run.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTWICE_UNITY_BUILD=OFF -DTWICE_KERNELS_ONLY=ON -DTWICE_WITH_CUDA=ON -DTWICE_BUILD_BENCH=OFF \
  -DTWICE_WERROR=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  "${deps_args[@]}" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log" >&2; exit 1; }
# The engine is configured when its packages were found (CMake says so).
engine_bench=()
if grep -q 'kernels-only build with the engine: ON' "$build.configure.log"; then
  for f in "$root"/tests/cuda_engine/*_test.cc; do tests+=("$(basename "$f" .cc)"); done
  engine_bench=(cuda_engine_bench)
else
  log "engine not configured: the whole-model tests and cuda_engine_bench skipped"
fi
targets=("${tests[@]}" cuda_prefill_bench "${engine_bench[@]}")
log "build (${targets[*]})"
jobs="${TWICE_DEVICE_JOBS:-$(nproc 2>/dev/null || echo 16)}"
if ! timeout "$(limit "${TWICE_DEVICE_BUILD_S:-240}")" ninja -C "$build" -j"$jobs" "${targets[@]}" >"$build.build.log" 2>&1; then
  # The first errors, not the last lines (other jobs keep printing).
  grep -m3 -A30 '^FAILED:' "$build.build.log" >&2 || tail -50 "$build.build.log" >&2
  exit 1
fi
log "built"

# ---- 3. CUDA-vs-CPU tests on fresh random inputs ----------------------------------
export TWICE_CUDA_TEST_SEED="${TWICE_CUDA_TEST_SEED:-$(date +%s)}"
if [ -n "${OUT:-}" ]; then
  results="$OUT"
else
  results="$root/bench/results"
fi
mkdir -p "$results"
out="$results/cuda_$(date -u +%Y%m%d_%H%M%S).md"
{
  echo "# CUDA device check $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "GPU: $gpu; nvcc: $("$nvcc" --version | tail -1); commit: ${TWICE_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo
  echo "## Tests (TWICE_CUDA_TEST_SEED=$TWICE_CUDA_TEST_SEED)"
  echo
  echo "| test binary | result |"
  echo "|---|---|"
} >"$out"
failed=0
for t in "${tests[@]}"; do
  bin=$(find "$build" -name "$t" -type f -perm -u+x | head -1)
  t_limit=$(limit 90)
  if ! has_time 5; then
    failed=1
    echo "| $t | NOT RUN: the check's time budget was spent |" >>"$out"
    continue
  fi
  if [ -z "$bin" ]; then
    failed=1
    echo "| $t | FAILED: not built |" >>"$out"
  elif timeout "$t_limit" "$bin" >"$build.$t.log" 2>&1; then
    summary=$(grep -E "^\[  PASSED  \]|^\[  SKIPPED \] [0-9]" "$build.$t.log" | tr '\n' ' ')
    echo "| $t | ok ${summary} |" >>"$out"
  else
    rc=$?
    failed=1
    why=$(grep -E '^\[  FAILED  \]' "$build.$t.log" | tr '\n' ' ')
    [ "$rc" -eq 124 ] && why="timed out after ${t_limit} s; $why"
    echo "| $t | FAILED (exit $rc): $why |" >>"$out"
    grep -B5 -E "Failure|error" "$build.$t.log" | head -40 >&2
  fi
done
log "tests done (failed=$failed)"

# ---- 4. PyTorch SDPA baseline (optional) --------------------------------------------
tokens="2048,8192,16384,32768"
engine_flags=(--tokens=2048,8192,32768 --reps=2)
if [ -n "${TWICE_DEVICE_QUICK:-}" ]; then
  tokens="2048,8192"
  engine_flags=(--tokens=2048 --decode_batches=1,16 --reps=1)
fi
sdpa="$build.sdpa.txt"
: >"$sdpa"
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    py="$p"; break
  fi
done
if [ -n "$py" ]; then
  log "SDPA baseline with $py"
  timeout "$(limit 90)" "$py" - "$tokens" >"$sdpa" <<'PY' || log "SDPA failed; rows will say skipped"
import sys, torch
import torch.nn.functional as F
for t in [int(x) for x in sys.argv[1].split(",")]:
    q, k, v = (torch.randn(16, 16, t, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    try:
        ctx = torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
    except AttributeError:
        ctx = torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    with ctx:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        best = 1e30
        for _ in range(3):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); F.scaled_dot_product_attention(q, k, v, is_causal=True); e.record()
            torch.cuda.synchronize()
            best = min(best, s.elapsed_time(e))
    print(t, best)
    del q, k, v
PY
else
  log "no torch with CUDA: SDPA rows say skipped"
fi

# ---- 5. the prefill table ------------------------------------------------------------
{
  echo
  echo "## Prefill timings"
  echo
  [ -z "$py" ] && echo "PyTorch SDPA: skipped: no torch (with CUDA) on this machine." && echo
} >>"$out"
log "bench (tokens $tokens)"
bench=$(find "$build" -name cuda_prefill_bench -type f -perm -u+x | head -1)
if ! has_time 20; then
  failed=1
  echo "bench NOT RUN: the check's time budget was spent" | tee "$build.bench.log" >>"$out"
elif ! timeout "$(limit 150)" "$bench" --tokens="$tokens" --batch=16 --sdpa="$sdpa" \
     --out="$out" >"$build.bench.log" 2>&1; then
  failed=1
  echo "bench FAILED: $(tail -3 "$build.bench.log")" >>"$out"
fi
cat "$build.bench.log"
if [ ${#engine_bench[@]} -gt 0 ] && ! has_time 20; then
  failed=1
  echo "engine bench NOT RUN: the check's time budget was spent" >>"$out"
elif [ ${#engine_bench[@]} -gt 0 ]; then
  log "engine bench (${engine_flags[*]})"
  ebench=$(find "$build" -name cuda_engine_bench -type f -perm -u+x | head -1)
  if ! (cd "$root" && timeout "$(limit 150)" "$ebench" "${engine_flags[@]}" \
          --out="$out") >"$build.engine_bench.log" 2>&1; then
    failed=1
    echo "engine bench FAILED: $(tail -3 "$build.engine_bench.log")" >>"$out"
  fi
  cat "$build.engine_bench.log"
  # Llama (the paged KV cache) at short lengths: its offload rows attend
  # in O(T^2) per layer, so 32k tokens would not fit the check's time.
  log "engine bench (llama-360m-shape)"
  if ! (cd "$root" && timeout "$(limit 90)" "$ebench" --models=llama:llama-360m-shape \
          --tokens=2048 --decode_batches=1,16,64 --reps=2 \
          --out="$out") >"$build.engine_bench_llama.log" 2>&1; then
    failed=1
    echo "engine bench (llama) FAILED: $(tail -3 "$build.engine_bench_llama.log")" >>"$out"
  fi
  cat "$build.engine_bench_llama.log"
fi
{
  echo
  echo "Targets (H200, JRT Table 5's shape): based <= 4.5 ms and jrt <= 5.6 ms"
  echo "at T = 32768, B = 16; engine prefill >= 40 % of the same run's bf16 GEMM"
  echo "ceiling (from the engine rows' tok/s and the model's FLOPs per token:"
  echo "the engine table has no FLOP column); decode >= 50 % of the HBM bound."
  echo
  echo "Total device check time: $(($(date +%s) - start)) s"
} >>"$out"
log "wrote $out"
exit $failed
