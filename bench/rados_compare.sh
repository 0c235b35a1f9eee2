#!/usr/bin/env bash
# The RADOS store against its two speed references, in one run on one local
# Ceph cluster (scripts/ceph_dev_cluster.sh: one monitor, three OSDs, pools
# of size 3):
#   1. twice-bench store --store=rados: PutState/GetState beside the raw
#      librados client writing and reading the same bytes;
#   2. twice-bench pipeline TTFT of questions, a server on --store=rados
#      beside one on the embedded RocksDB store, rounds alternated: with the
#      default state caches (as deployed: a question on a cached document
#      then reads its record from the store, its state from decode's
#      memory), and with every state cache off (--state_cache_bytes=0,
#      --store_state_cache_bytes=0: each question reads its state from the
#      store too).
# Prints both tables and the load average; results under DIR.
#
# --model DIR serves that model directory in every server (default: the
# built-in tiny model, whose first token takes about 2 ms, so the store's
# fixed costs are most of the ratio); --questions N per row (default 16).
#
#   bench/rados_compare.sh [--out DIR] [--rounds N] [--doc_tokens N]
#                          [--model DIR] [--questions N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TWICE_BUILD_DIR:-$root/build}
out=""
rounds=3
doc_tokens=2048
model=""
questions=16
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --doc_tokens) doc_tokens="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --questions) questions="$2"; shift 2 ;;
    *) echo "rados_compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$build/rados-compare}
rm -rf "$out"; mkdir -p "$out"
ceph="$out/ceph"
"$root/scripts/ceph_dev_cluster.sh" start "$ceph" --fresh >/dev/null
pids=()
cleanup() {
  for pid in ${pids[@]+"${pids[@]}"}; do kill "$pid" 2>/dev/null || true; done
  "$root/scripts/ceph_dev_cluster.sh" stop "$ceph" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/twice-bench" store --store=rados --rados_conf="$ceph/ceph.conf" \
  --store_sizes_mb=1,16 --store_iterations=10 | tee "$out/store.txt"

start_server() {  # name port args...
  local name=$1 port=$2; shift 2
  "$build/services/twice-server" --listen=127.0.0.1:"$port" \
    --data_dir="$out/$name" ${model:+--model="$model"} "$@" >"$out/$name.stdout" 2>"$out/$name.log" &
  pids+=($!)
  for _ in $(seq 1 300); do
    grep -q "listening on" "$out/$name.stdout" && return 0
    sleep 0.1
  done
  echo "rados_compare.sh: the $name server did not start ($out/$name.log)" >&2
  exit 1
}
rados=(--store=rados --rados_conf="$ceph/ceph.conf")
uncached=(--state_cache_bytes=0 --store_state_cache_bytes=0)
declare -A port_of=([embedded]=57701 [rados]=57702 [embedded-uncached]=57703
                    [rados-uncached]=57704)
start_server embedded 57701
start_server rados 57702 "${rados[@]}" --rados_pool_prefix=bench-cached
start_server embedded-uncached 57703 "${uncached[@]}"
start_server rados-uncached 57704 "${rados[@]}" "${uncached[@]}"

for round in $(seq 1 "$rounds"); do
  for name in embedded rados embedded-uncached rados-uncached; do
    port=${port_of[$name]}
    "$build/bench/twice-bench" pipeline --server=127.0.0.1:$port \
      --doc_tokens="$doc_tokens" --questions="$questions" --bench_modes=default --json \
      >"$out/pipeline.$name.$round.json"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def ttft(name, cache):
    values = []
    for r in range(1, rounds + 1):
        for line in open(f"{out}/pipeline.{name}.{r}.json"):
            row = json.loads(line)
            if row.get("cache") == cache and row.get("mode") == "default":
                values.append(row["ttft_ms_p50"])
    return values
print("| state caches | document | embedded TTFT p50 ms (per round) | rados TTFT p50 ms (per round) | rados / embedded (median) |")
print("| --- | --- | --- | --- | --- |")
for suffix, caches in (("", "default"), ("-uncached", "off")):
    for cache in ("cached", "cold"):
        e, r = ttft("embedded" + suffix, cache), ttft("rados" + suffix, cache)
        ratio = statistics.median(r) / statistics.median(e)
        print(f"| {caches} | {cache} | {', '.join(f'{v:.1f}' for v in e)} | "
              f"{', '.join(f'{v:.1f}' for v in r)} | {ratio:.2f}x |")
PY
