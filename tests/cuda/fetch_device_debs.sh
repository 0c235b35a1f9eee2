#!/usr/bin/env bash
# Downloads, on a machine that reaches the Debian archive, the .deb files
# the device check needs and a bare GPU machine may lack (Abseil,
# GoogleTest, OpenBLAS; for the whole-model test also nlohmann-json,
# xxhash, ICU, OpenSSL headers and pkg-config) into .device-debs/
# (git-ignored, about 37 MB), so they can travel with the working tree to a
# machine that cannot fetch anything. tests/cuda/device_check.sh unpacks
# them into a private prefix beside its build (never into /) when the
# system lacks those packages.
#   tests/cuda/fetch_device_debs.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device-debs
cd .device-debs
# Only this run's packages: a second version of one would be unpacked too.
rm -f ./*.deb
apt-get download \
  libabsl-dev libabsl20220623 libgtest-dev libgmock-dev \
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 \
  libgfortran5 \
  libquadmath0 \
  nlohmann-json3-dev libxxhash-dev libxxhash0 libicu-dev libicu72 libssl-dev \
  libssl3 \
  pkgconf pkgconf-bin libpkgconf3 pkg-config
ls -1 ./*.deb | wc -l | xargs echo "debs in .device-debs:"
