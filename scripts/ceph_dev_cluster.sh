#!/usr/bin/env bash
# A real Ceph cluster on 127.0.0.1 for tests and benchmarks of the RADOS
# store: one monitor (three with --mons 3), a manager, and three BlueStore
# OSDs on sparse files, pools of size 3 / min_size 2, memory and threads cut
# down for a 2-core machine. Everything lives under DIR; nothing is
# installed or left running elsewhere.
#
#   scripts/ceph_dev_cluster.sh start DIR [--mons 1|3] [--osds N]
#                                         [--base-port P] [--no-mgr] [--fresh]
#       Starts the cluster, waits until every placement group is
#       active+clean, and prints the path of its ceph.conf (DIR/ceph.conf).
#       --fresh first stops and removes a cluster already in DIR.
#   scripts/ceph_dev_cluster.sh stop DIR
#       Stops every daemon of the cluster in DIR (the data stays).
#   scripts/ceph_dev_cluster.sh kill-osd DIR ID / start-osd DIR ID
#       kill -9 of one OSD, and its restart: for fault tests. start-osd
#       returns once the monitor has marked the restarted OSD up (a boot
#       newer than the map it started from), up to 120 s.
#   scripts/ceph_dev_cluster.sh restart-mon DIR ID
#   scripts/ceph_dev_cluster.sh wait-clean DIR SECONDS
#       Waits until every OSD is up and every placement group is
#       active+clean again.
#
# Ports: monitors on P, P+1, P+2 (default P 3300), the manager and OSDs in
# [P+100, P+599]; give each concurrent cluster its own --base-port. Auth is
# off: the cluster listens on loopback only and holds test data.
# Packages: scripts/setup.sh --ceph.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 2 ] || usage
command=$1
dir=$2
shift 2

conf="$dir/ceph.conf"
ceph_cli() { ceph --conf "$conf" --connect-timeout 10 "$@"; }

# Waits until the OSD map has every OSD up and `ceph pg stat` reports every
# placement group active+clean, in two polls in a row (the manager's
# placement-group states lag the OSD map by a few seconds: right after a
# restart they can still be the clean ones from before the kill), up to $1
# seconds.
wait_clean() {
  local deadline=$((SECONDS + $1)) clean=0 stat osds
  while [ $SECONDS -lt $deadline ]; do
    stat=$(ceph_cli pg stat -f json 2>/dev/null || true)
    osds=$(ceph_cli osd dump -f json 2>/dev/null || true)
    if /usr/bin/python3 - "$stat" "$osds" <<'EOF'
import json, sys
try:
    s = json.loads(sys.argv[1])
    osds = json.loads(sys.argv[2]).get("osds", [])
except ValueError:
    sys.exit(1)
if not osds or any(o.get("up") != 1 for o in osds):
    sys.exit(1)
s = s.get("pg_summary", s)
states = {x["name"]: x["num"] for x in s.get("num_pg_by_state", [])}
total = s.get("num_pgs", 0)
sys.exit(0 if total > 0 and states.get("active+clean", 0) == total else 1)
EOF
    then
      clean=$((clean + 1))
      [ $clean -ge 2 ] && return 0
    else
      clean=0
    fi
    sleep 1
  done
  echo "ceph_dev_cluster: placement groups not active+clean after $1 s" >&2
  ceph_cli -s >&2 || true
  return 1
}

# Signals the daemon whose pid file is $1, if that pid is still a Ceph
# daemon (a pid file can outlive its process, and the pid be reused).
signal_daemon() {
  local pidfile=$1 signal=$2 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile" 2>/dev/null || true)
  [ -n "$pid" ] || return 0
  if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "ceph-"; then
    kill "-$signal" "$pid" 2>/dev/null || true
    echo "$pid"
  fi
}

start_osd() {
  local id=$1
  ceph-osd --conf "$conf" -i "$id" 2>>"$(dirname "$conf")/log/osd.$id.stderr"
}

# The OSD map's epoch (empty when the monitors do not answer).
osd_map_epoch() {
  ceph_cli osd dump -f json 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["epoch"])' \
      2>/dev/null || true
}

# Waits up to $3 seconds until OSD $1 is up from an epoch after $2: the
# restarted daemon booted, not the killed one the monitor has not yet
# marked down.
wait_osd_booted() {
  local id=$1 after=$2 deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    if ceph_cli osd dump -f json 2>/dev/null |
      /usr/bin/python3 -c '
import json, sys
id, after = int(sys.argv[1]), int(sys.argv[2])
for o in json.load(sys.stdin).get("osds", []):
    if o.get("osd") == id:
        sys.exit(0 if o.get("up") == 1 and o.get("up_from", 0) > after else 1)
sys.exit(1)' "$id" "$after" 2>/dev/null; then
      return 0
    fi
    sleep 1
  done
  echo "ceph_dev_cluster: osd.$id not up after $3 s" >&2
  ceph_cli osd tree >&2 || true
  return 1
}

case "$command" in
  start)
    mons=1
    osds=3
    base_port=3300
    with_mgr=1
    fresh=0
    while [ $# -gt 0 ]; do
      case "$1" in
        --mons) mons=$2; shift 2 ;;
        --osds) osds=$2; shift 2 ;;
        --base-port) base_port=$2; shift 2 ;;
        --no-mgr) with_mgr=0; shift ;;
        --fresh) fresh=1; shift ;;
        *) usage ;;
      esac
    done
    [ "$mons" = 1 ] || [ "$mons" = 3 ] || usage
    for tool in ceph ceph-mon ceph-osd monmaptool; do
      command -v "$tool" >/dev/null || {
        echo "ceph_dev_cluster: $tool not found; run scripts/setup.sh --ceph" >&2
        exit 1
      }
    done
    if [ "$fresh" = 1 ] && [ -f "$dir/fsid" ]; then
      "$0" stop "$dir" || true
      rm -rf "$dir"
    fi
    if [ -f "$dir/fsid" ]; then
      echo "ceph_dev_cluster: $dir already holds a cluster; stop it and" \
        "remove the directory first" >&2
      exit 1
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    conf="$dir/ceph.conf"
    fsid=$(cat /proc/sys/kernel/random/uuid)
    echo "$fsid" >"$dir/fsid"
    mon_names=(a b c)
    mon_hosts=()
    for ((i = 0; i < mons; i++)); do
      mon_hosts+=("[v2:127.0.0.1:$((base_port + i))]")
    done
    # The settings a small local cluster needs (see the comments); the
    # rest are Ceph's defaults.
    cat >"$conf" <<EOF
[global]
fsid = $fsid
mon_host = $(IFS=,; echo "${mon_hosts[*]}")
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
# msgr2 on IPv4 loopback only.
ms_bind_msgr1 = false
ms_bind_ipv4 = true
ms_bind_ipv6 = false
public_network = 127.0.0.0/8
ms_bind_port_min = $((base_port + 100))
ms_bind_port_max = $((base_port + 599))
# Every OSD on one host: replicate across OSDs, not hosts.
osd_crush_chooseleaf_type = 0
osd_pool_default_size = 3
osd_pool_default_min_size = 2
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_delete = true
mon_allow_pool_size_one = true
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
# Tests make a pool or two each: with 8 PGs of 3 replicas on 3 OSDs the
# default of 250 PGs per OSD would stop at about 30 pools.
mon_max_pg_per_osd = 2000
# Auth is off on loopback: nothing to reclaim securely.
mon_warn_on_insecure_global_id_reclaim_allowed = false
# One peer is enough to mark a killed OSD down quickly.
mon_osd_min_down_reporters = 1
osd_heartbeat_interval = 1
osd_heartbeat_grace = 6
# Test machines often have less free disk than the production warning level.
mon_data_avail_warn = 2
mon_data_avail_crit = 1
log_file = $dir/log/\$name.log
pid_file = $dir/run/\$name.pid
admin_socket = $dir/run/\$name.asok
run_dir = $dir/run
mon_data = $dir/mon/\$name
osd_data = $dir/osd/\$name
mgr_data = $dir/mgr/\$name

[osd]
osd_objectstore = bluestore
bluestore_block_create = true
# A sparse file in the OSD's directory; only what is written takes space.
bluestore_block_size = 4294967296
bluestore_block_db_create = false
bluestore_block_wal_create = false
# Two cores: few shards and threads. (osd_memory_target has a floor of
# 896 MiB; smaller values are ignored.)
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
osd_memory_target = 939524096
# File-backed OSDs count as disks: do not throttle recovery.
osd_recovery_sleep = 0
osd_recovery_sleep_hdd = 0

[mgr]
# Only the modules Ceph cannot run without.
mgr_initial_modules =
EOF
    mkdir -p "$dir/log" "$dir/run" "$dir/mon" "$dir/osd" "$dir/mgr"
    monmap="$dir/monmap"
    monmap_args=()
    for ((i = 0; i < mons; i++)); do
      monmap_args+=(--addv "${mon_names[$i]}" "[v2:127.0.0.1:$((base_port + i))]")
    done
    monmaptool --create --fsid "$fsid" "${monmap_args[@]}" "$monmap" >/dev/null
    for ((i = 0; i < mons; i++)); do
      name=${mon_names[$i]}
      ceph-mon --conf "$conf" --mkfs -i "$name" --monmap "$monmap" >/dev/null
      ceph-mon --conf "$conf" -i "$name" 2>>"$dir/log/mon.$name.stderr"
    done
    if [ "$with_mgr" = 1 ]; then
      mkdir -p "$dir/mgr/mgr.x"
      ceph-mgr --conf "$conf" -i x 2>>"$dir/log/mgr.x.stderr"
    fi
    for ((i = 0; i < osds; i++)); do
      uuid=$(cat /proc/sys/kernel/random/uuid)
      id=$(ceph_cli osd new "$uuid")
      mkdir -p "$dir/osd/osd.$id"
      ceph-osd --conf "$conf" -i "$id" --mkfs --osd-uuid "$uuid" \
        >"$dir/log/osd.$id.mkfs.log" 2>&1 &
    done
    wait
    for ((i = 0; i < osds; i++)); do start_osd "$i"; done
    # A pool of its own proves the cluster takes writes before anyone uses
    # it; the RADOS store makes its own pools.
    ceph_cli osd pool create twice-dev-ready 8 8 replicated >/dev/null 2>&1
    ceph_cli osd pool application enable twice-dev-ready rados >/dev/null 2>&1
    wait_clean 120
    echo "$conf"
    ;;
  stop)
    [ -f "$conf" ] || { echo "ceph_dev_cluster: no cluster in $dir" >&2; exit 1; }
    pids=()
    for pidfile in "$dir"/run/*.pid; do
      [ -e "$pidfile" ] || continue
      pid=$(signal_daemon "$pidfile" TERM)
      [ -n "$pid" ] && pids+=("$pid")
    done
    # Give them a few seconds, then make sure.
    for _ in $(seq 1 50); do
      alive=0
      for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null && alive=1
      done
      [ $alive = 0 ] && break
      sleep 0.2
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    ;;
  kill-osd)
    [ $# -eq 1 ] || usage
    signal_daemon "$dir/run/osd.$1.pid" KILL >/dev/null
    ;;
  start-osd)
    [ $# -eq 1 ] || usage
    epoch=$(osd_map_epoch)
    start_osd "$1"
    wait_osd_booted "$1" "${epoch:-0}" 120
    ;;
  wait-clean)
    [ $# -eq 1 ] || usage
    wait_clean "$1"
    ;;
  restart-mon)
    [ $# -eq 1 ] || usage
    pid=$(signal_daemon "$dir/run/mon.$1.pid" TERM)
    for _ in $(seq 1 50); do
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    ceph-mon --conf "$conf" -i "$1"
    ;;
  *)
    usage
    ;;
esac
