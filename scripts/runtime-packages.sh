#!/usr/bin/env bash
# Prints, one per line, the installed Debian/Ubuntu packages that provide the
# shared libraries the given binaries load: what a runtime image must
# install (deploy/docker/). Libraries outside the package database (the
# CUDA toolkit under /usr/local/cuda) are left to the base image.
#   scripts/runtime-packages.sh build/services/twice-server build/services/twice
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
for binary in "$@"; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  real=$(readlink -f "$lib")
  dpkg-query -S "$lib" 2>/dev/null || dpkg-query -S "$real" 2>/dev/null || true
done | cut -d: -f1 | sort -u
