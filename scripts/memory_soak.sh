#!/usr/bin/env bash
# Memory under repeated load: one twice-server (role all, the shipped
# jrt-qa model) takes ROUNDS rounds of `twice-bench load` of SECONDS each;
# after each round (and a settle time) its resident memory is printed. A
# leak grows round after round; caches fill once and stay within their
# configured sizes.
#   scripts/memory_soak.sh [ROUNDS=5] [SECONDS=60] [server flags ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
seconds=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
bin=${TWICE_BUILD_DIR:-$root/build}/services
bench_bin=${TWICE_BUILD_DIR:-$root/build}/bench
[ -x "$bin/twice-server" ] || "$root/scripts/build.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/twice-soak.XXXXXX")
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin/twice-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --data_dir="$work/store" --model=qa="$root/models/jrt-qa" "$@" \
  >"$work/stdout" 2>"$work/log" &
pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/stdout" && break; sleep 0.1; done
address=$(sed -n 's/^twice-server listening on //p' "$work/stdout")
metrics=127.0.0.1:$(grep -o 'event=metrics.started .*port=[0-9]*' "$work/log" | sed 's/.*port=//')
echo "round  calls  failed  rss_start_MiB  rss_peak_MiB  rss_end_MiB"
for round in $(seq 1 "$rounds"); do
  "$bench_bin/twice-bench" load --server="$address" --metrics="$metrics" \
    --load_seconds="$seconds" --load_clients=8 --load_id_prefix="soak$round" \
    --json >"$work/round.json"
  /usr/bin/python3 - "$round" "$work/round.json" <<'PY'
import json, sys
r = json.loads(open(sys.argv[2]).read().splitlines()[-1])
calls = sum(o["calls"] for o in r["ops"].values())
ok = sum(o["ok"] for o in r["ops"].values())
m = r["memory"][0]
mib = lambda b: b / 2**20
print(f"{sys.argv[1]:>5}  {calls:>5}  {calls - ok:>6}  {mib(m['start_bytes']):>13.1f}  "
      f"{mib(m['peak_bytes']):>12.1f}  {mib(m['end_bytes']):>11.1f}")
PY
done
