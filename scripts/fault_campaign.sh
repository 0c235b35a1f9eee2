#!/usr/bin/env bash
# The load-and-fault campaign of docs/RELIABILITY.md: `twice-bench load`
# against the disaggregated layout (store, prefill, decode and orchestrator
# processes on 127.0.0.1), first without faults (the baseline, whose greedy
# answers every later run must reproduce), then once per fault kind while
# the fault is injected at random moments:
#
#   kill       kill -9 of the store, prefill or decode process, restarted
#              after a random pause
#   corrupt    random bytes of a random state blob file of the store
#              overwritten in place (bit rot under a live store); the
#              store's, prefill's and decode's state caches are off, so
#              reads meet the damage instead of a cached copy
#   disk-full  the store's directory on a small tmpfs that a ballast file
#              fills to the last byte, held, then freed
#
# With --store rados the same workload runs on the RADOS store of a local
# Ceph cluster (scripts/ceph_dev_cluster.sh, started under DIR/ceph): no
# store process, every role on the cluster (each deployment its own pools)
# and a janitor; the kinds are then
#
#   kill         kill -9 of prefill, decode or the janitor, restarted
#   osd-kill     kill -9 of one of the three OSDs, restarted after 2-15 s
#                (pools of size 3, min_size 2: writes go on)
#   mon-restart  the monitor stopped and started again
#   corrupt      a random state object overwritten with random bytes
#                (`rados put`), every state cache off
#
# Each run checks what bench load checks (no acknowledged document lost, no
# answer different from the baseline, every failure a clean status) and
# reports memory. Fault kinds run one after another unless --parallel.
#
#   scripts/fault_campaign.sh [--minutes N] [--baseline-minutes N]
#       [--kinds kill,corrupt,disk-full] [--parallel] [--out DIR]
#       [--baseline EARLIER_DIR]   (reuse an earlier campaign's baseline)
#       [--store rocksdb|rados]
#
# Needs root for the tmpfs of disk-full. Results: DIR/<kind>.json (bench
# load --json), DIR/<kind>.faults (one line per injected fault), logs, and
# DIR/summary.md. Exits non-zero when any run broke a requirement.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minutes=10
baseline_minutes=3
kinds=""
store=rocksdb
parallel=0
out=""
reuse_baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --baseline-minutes) baseline_minutes="$2"; shift 2 ;;
    --kinds) kinds="$2"; shift 2 ;;
    --parallel) parallel=1; shift ;;
    --out) out="$2"; shift 2 ;;
    --baseline) reuse_baseline="$2"; shift 2 ;;
    --store) store="$2"; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "fault_campaign.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$store" in
  rocksdb) kinds=${kinds:-kill,corrupt,disk-full}; roles=(store prefill decode orchestrator) ;;
  rados) kinds=${kinds:-kill,osd-kill,mon-restart,corrupt}; roles=(prefill decode orchestrator janitor) ;;
  *) echo "fault_campaign.sh: --store is rocksdb or rados" >&2; exit 2 ;;
esac
out=${out:-$root/build/fault-campaign-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
ceph_dir=$out/ceph
if [ "$store" = rados ]; then
  "$root/scripts/ceph_dev_cluster.sh" start "$ceph_dir" --fresh >/dev/null
  trap '"$root/scripts/ceph_dev_cluster.sh" stop "$ceph_dir" >/dev/null 2>&1 || true' EXIT
fi
bin=${TWICE_BUILD_DIR:-$root/build}/services
bench_bin=${TWICE_BUILD_DIR:-$root/build}/bench
[ -x "$bin/twice-server" ] || "$root/scripts/build.sh"
model=qa=$root/models/jrt-qa
store_extra=()
cache_extra=()
# The workload: 8 clients, 2-segment documents with up to 3 appends, every
# ask mode of the JRT model, 4-token greedy answers, 30 s call deadlines.
load_args=(--load_clients=8 --load_docs_per_client=2 --load_doc_tokens=256
           --load_append_tokens=64 --segment_tokens=128 --timeout_seconds=30
           --load_verify_seconds=180 --json)

# ---------------------------------------------------------------- layout
# Ports of deployment N: 57N00 + role offset; metrics at +50.
port_of() {  # deployment role
  local base=$((57000 + $1 * 100))
  case "$2" in
    store) echo $((base + 1)) ;; prefill) echo $((base + 2)) ;;
    decode) echo $((base + 3)) ;; orchestrator) echo $((base + 4)) ;;
    janitor) echo $((base + 5)) ;;
  esac
}

role_args() {  # deployment dir role
  local n=$1 dir=$2 role=$3
  local store_flags=(--store_address=127.0.0.1:$(port_of "$n" store))
  [ "$store" = rados ] && store_flags=(--store=rados --rados_conf="$ceph_dir/ceph.conf"
                                       --rados_pool_prefix="campaign-$n")
  local args=(--role="$role" --listen=127.0.0.1:$(port_of "$n" "$role")
              --metrics_listen=127.0.0.1:$(( $(port_of "$n" "$role") + 50 ))
              --shutdown_grace_seconds=1)
  case "$role" in
    janitor) args+=("${store_flags[@]}" --janitor_lease_seconds=5
                    --janitor_interval_seconds=10 --janitor_grace_seconds=120) ;;
    store) args+=(--data_dir="$dir/store" ${store_extra[@]+"${store_extra[@]}"}) ;;
    prefill|decode) args+=("${store_flags[@]}" --model="$model"
                           ${cache_extra[@]+"${cache_extra[@]}"}) ;;
    orchestrator)
      args+=("${store_flags[@]}" --model="$model"
             --prefill_address=127.0.0.1:$(port_of "$n" prefill)
             --decode_address=127.0.0.1:$(port_of "$n" decode)) ;;
  esac
  printf '%s\n' "${args[@]}"
}

start_role() {  # deployment dir role
  local n=$1 dir=$2 role=$3
  mapfile -t args < <(role_args "$n" "$dir" "$role")
  : >"$dir/$role.stdout"
  "$bin/twice-server" "${args[@]}" >>"$dir/$role.stdout" 2>>"$dir/$role.log" &
  echo $! >"$dir/$role.pid"
  for _ in $(seq 1 300); do
    grep -q "listening on" "$dir/$role.stdout" && return 0
    kill -0 "$(cat "$dir/$role.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "fault_campaign: $role of $dir did not start; see $dir/$role.log" >&2
  return 1
}

stop_deployment() {  # dir
  for role in "${roles[@]}"; do
    [ -f "$1/$role.pid" ] && kill "$(cat "$1/$role.pid")" 2>/dev/null || true
  done
  sleep 2
  for role in "${roles[@]}"; do
    [ -f "$1/$role.pid" ] && kill -9 "$(cat "$1/$role.pid")" 2>/dev/null || true
  done
}

start_deployment() {  # deployment dir
  mkdir -p "$2"
  for role in "${roles[@]}"; do start_role "$1" "$2" "$role"; done
}

metrics_of() {  # deployment
  local list=""
  for role in "${roles[@]}"; do
    list+="${list:+,}127.0.0.1:$(( $(port_of "$1" "$role") + 50 ))"
  done
  echo "$list"
}

# ---------------------------------------------------------------- faults
rand() { echo $(( $1 + RANDOM % ($2 - $1 + 1) )); }

fault_kill() {  # deployment dir end_epoch
  local victims=(store prefill decode)
  [ "$store" = rados ] && victims=(janitor prefill decode)
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep "$(rand 3 15)"
    [ "$(date +%s)" -lt "$3" ] || break
    local role=${victims[$((RANDOM % 3))]}
    kill -9 "$(cat "$2/$role.pid")" 2>/dev/null || true
    wait "$(cat "$2/$role.pid")" 2>/dev/null || true
    local pause_ms; pause_ms=$(rand 200 3000)
    echo "$(date +%s) kill -9 $role; restart after ${pause_ms} ms" >>"$2/faults"
    sleep "$(awk "BEGIN{print $pause_ms/1000}")"
    start_role "$1" "$2" "$role" || echo "$(date +%s) restart of $role FAILED" >>"$2/faults"
  done
}

fault_corrupt() {  # deployment dir end_epoch
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep "$(rand 3 10)"
    mapfile -t blobs < <(find "$2/store" -name '*.blob' -size +1k 2>/dev/null)
    [ ${#blobs[@]} -gt 0 ] || continue
    local file=${blobs[$((RANDOM % ${#blobs[@]}))]}
    local size; size=$(stat -c %s "$file")
    # 4 runs of 16 bytes at random offsets past the blob file header.
    local offsets=()
    for _ in 1 2 3 4; do
      local offset=$(( 64 + (RANDOM * 32768 + RANDOM) % (size > 80 ? size - 80 : 1) ))
      head -c 16 /dev/urandom | dd of="$file" bs=1 seek="$offset" conv=notrunc status=none 2>/dev/null || continue
      offsets+=("$offset")
    done
    echo "$(date +%s) corrupted 16 bytes at ${offsets[*]} of $(basename "$file") ($size bytes)" >>"$2/faults"
  done
}

fault_osd_kill() {  # deployment dir end_epoch
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep "$(rand 5 15)"
    [ "$(date +%s)" -lt "$3" ] || break
    local osd=$((RANDOM % 3)) pause; pause=$(rand 2 15)
    "$root/scripts/ceph_dev_cluster.sh" kill-osd "$ceph_dir" "$osd"
    echo "$(date +%s) kill -9 osd.$osd; restart after ${pause} s" >>"$2/faults"
    sleep "$pause"
    "$root/scripts/ceph_dev_cluster.sh" start-osd "$ceph_dir" "$osd" >/dev/null ||
      echo "$(date +%s) restart of osd.$osd FAILED" >>"$2/faults"
  done
  "$root/scripts/ceph_dev_cluster.sh" wait-clean "$ceph_dir" 120 >/dev/null || true
}

fault_mon_restart() {  # deployment dir end_epoch
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep "$(rand 10 20)"
    [ "$(date +%s)" -lt "$3" ] || break
    "$root/scripts/ceph_dev_cluster.sh" restart-mon "$ceph_dir" a >/dev/null ||
      echo "$(date +%s) restart of mon.a FAILED" >>"$2/faults"
    echo "$(date +%s) restarted mon.a" >>"$2/faults"
  done
}

fault_rados_corrupt() {  # deployment dir end_epoch
  local pool=campaign-$1-states
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep "$(rand 3 10)"
    mapfile -t objects < <(rados --conf "$ceph_dir/ceph.conf" -p "$pool" ls 2>/dev/null | grep '^s\.')
    [ ${#objects[@]} -gt 0 ] || continue
    local object=${objects[$((RANDOM % ${#objects[@]}))]}
    head -c "$(rand 1024 65536)" /dev/urandom >"$2/garbage"
    rados --conf "$ceph_dir/ceph.conf" -p "$pool" put "$object" "$2/garbage" 2>/dev/null || continue
    echo "$(date +%s) overwrote $object" >>"$2/faults"
  done
}

# corrupt and disk-full must not take a process down: one that dies anyway
# is logged as a CRASH (a defect) and restarted, so the run goes on.
watchdog() {  # deployment dir end_epoch
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep 1
    for role in "${roles[@]}"; do
      if ! kill -0 "$(cat "$2/$role.pid")" 2>/dev/null; then
        echo "$(date +%s) CRASH of $role ($(tail -n 1 "$2/$role.log" | cut -c1-200)); restarted" >>"$2/faults"
        start_role "$1" "$2" "$role" || true
      fi
    done
  done
}

fault_disk_full() {  # deployment dir end_epoch
  while [ "$(date +%s)" -lt "$3" ]; do
    sleep "$(rand 5 15)"
    [ "$(date +%s)" -lt "$3" ] || break
    dd if=/dev/zero of="$2/store/ballast" bs=1M status=none 2>/dev/null || true
    local hold; hold=$(rand 5 15)
    echo "$(date +%s) disk full ($(df --output=avail -B1 "$2/store" | tail -n 1) bytes left), held ${hold} s" >>"$2/faults"
    sleep "$hold"
    rm -f "$2/store/ballast"
  done
}

# ---------------------------------------------------------------- runs
run_kind() {  # kind deployment
  local kind=$1 n=$2 dir=$out/$1
  # corrupt: no state cache in the store, so reads go to the blob files the
  # fault overwrites (a cached copy would hide the damage).
  store_extra=()
  [ "$kind" = corrupt ] && store_extra=(--store_state_cache_bytes=0)
  cache_extra=()
  [ "$kind" = corrupt ] && cache_extra=(--state_cache_bytes=0)
  rm -rf "$dir"; mkdir -p "$dir"; : >"$dir/faults"
  if [ "$kind" = disk-full ]; then
    mkdir -p "$dir/store"
    mount -t tmpfs -o size=256m tmpfs "$dir/store"
  fi
  start_deployment "$n" "$dir"
  local seconds answers=(--answers_in="$out/baseline.answers.json")
  seconds=$(awk "BEGIN{printf \"%d\", $minutes * 60}")
  if [ "$kind" = baseline ]; then
    seconds=$(awk "BEGIN{printf \"%d\", $baseline_minutes * 60}")
    answers=(--answers_out="$out/baseline.answers.json")
  fi
  local end=$(( $(date +%s) + seconds )) injector=""
  case "$kind" in
    kill) fault_kill "$n" "$dir" "$end" & injector=$! ;;
    corrupt)
      if [ "$store" = rados ]; then fault_rados_corrupt "$n" "$dir" "$end" & injector=$!
      else fault_corrupt "$n" "$dir" "$end" & injector=$!; fi ;;
    osd-kill) fault_osd_kill "$n" "$dir" "$end" & injector=$! ;;
    mon-restart) fault_mon_restart "$n" "$dir" "$end" & injector=$! ;;
    disk-full) fault_disk_full "$n" "$dir" "$end" & injector=$! ;;
  esac
  local guard=""
  case "$kind" in
    corrupt|disk-full|osd-kill|mon-restart) watchdog "$n" "$dir" "$end" & guard=$! ;;
  esac
  local rc=0
  "$bench_bin/twice-bench" load --server=127.0.0.1:$(port_of "$n" orchestrator) \
    --load_seconds="$seconds" --load_id_prefix="$kind" "${load_args[@]}" \
    --metrics="$(metrics_of "$n")" "${answers[@]}" >"$dir/load.json" 2>"$dir/load.err" || rc=$?
  [ -z "$injector" ] || wait "$injector" 2>/dev/null || true
  [ -z "$guard" ] || kill "$guard" 2>/dev/null || true
  stop_deployment "$dir"
  [ "$kind" = disk-full ] && umount "$dir/store" 2>/dev/null || true
  cp "$dir/load.json" "$out/$kind.json"
  cp "$dir/faults" "$out/$kind.faults"
  echo "$rc" >"$out/$kind.rc"
  echo "== $kind: exit $rc, $(wc -l <"$dir/faults") faults; $(cat "$dir/load.err")"
}

echo "fault campaign ($store): baseline ${baseline_minutes} min, then ${minutes} min each of ${kinds}; results in $out"
if [ -n "$reuse_baseline" ]; then
  # The answers of an earlier campaign's baseline (same model and workload).
  cp "$reuse_baseline/baseline.json" "$reuse_baseline/baseline.faults" "$reuse_baseline/baseline.rc" "$out/"
  cp "$reuse_baseline/baseline.answers.json" "$out/"
else
  run_kind baseline 0
fi
IFS=, read -r -a kind_list <<<"$kinds"
n=1
for kind in "${kind_list[@]}"; do
  if [ "$parallel" = 1 ]; then run_kind "$kind" "$n" & else run_kind "$kind" "$n"; fi
  n=$((n + 1))
done
wait
/usr/bin/python3 "$root/scripts/fault_summary.py" "$out" baseline "${kind_list[@]}" | tee "$out/summary.md"
failed=0
for kind in baseline "${kind_list[@]}"; do [ "$(cat "$out/$kind.rc")" = 0 ] || failed=1; done
exit "$failed"
