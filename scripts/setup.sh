#!/usr/bin/env bash
# Installs every Debian package Twice needs to build, test and run.
#   scripts/setup.sh           build, test and run
#   scripts/setup.sh --tools   also the offline Python tools (tools/: torch
#                              reference, checkpoint conversion, training)
#   scripts/setup.sh --fuzz    also clang and libFuzzer (scripts/fuzz.sh)
#   scripts/setup.sh --ceph    also Ceph: librados for the RADOS store and
#                              the monitor, OSD and manager daemons of the
#                              local test cluster (scripts/ceph_dev_cluster.sh)
# Options combine (scripts/setup.sh --tools --ceph).
# Idempotent: when everything is present it prints nothing and exits 0.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev libssl-dev libxxhash-dev libicu-dev
  nlohmann-json3-dev libopenblas-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openssl  # the TLS tests make throwaway certificates
  python3-yaml
  python3-grpcio python3-protobuf python3-pytest  # the Python client and its tests
)
# The deploy tests render the Kubernetes manifests with `kubectl kustomize`;
# Debian's kubectl when none is installed.
if ! command -v kubectl >/dev/null 2>&1; then
  packages+=(kubernetes-client)
fi

for option in "$@"; do
  case "$option" in
    --tools)
      # Debian's torch, used only through /usr/bin/python3.
      packages+=(python3 python3-numpy python3-torch) ;;
    --fuzz)
      # clang++ and its runtime libraries (libclang_rt.fuzzer*.a, the
      # sanitizers).
      packages+=(clang libclang-rt-14-dev) ;;
    --ceph)
      packages+=(librados-dev libradospp-dev ceph-common ceph-mon ceph-osd
                 ceph-mgr) ;;
    *)
      echo "setup: unknown option $option (--tools, --fuzz, --ceph)" >&2
      exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 \
  install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
