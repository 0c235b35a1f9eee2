#!/usr/bin/env bash
# Sets up, builds and runs every test with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Ceph too: the tests labelled `ceph` run against a local cluster.
"$root/scripts/setup.sh" --ceph
"$root/scripts/build.sh"
build_dir=${TWICE_BUILD_DIR:-$root/build}
cd "$build_dir"
ctest --output-on-failure --parallel "$(nproc)" --timeout 600
