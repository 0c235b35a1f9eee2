#!/usr/bin/env bash
# Greedy answers of the shipped models with low-precision weights against
# f32: serves models/ twice (twice-server --weights_dtype=f32, then the
# dtype asked for), runs `twice eval` on the same set against each with
# --eval_answers, and prints per model the share of answers that are
# identical and each side's accuracy.
#   scripts/weights_dtype_agreement.sh [DTYPE=int8] [SET=tests/data/eval/full.jsonl]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtype=${1:-int8}
set_path=${2:-$root/tests/data/eval/full.jsonl}
bin=${TWICE_BUILD_DIR:-$root/build}/services
[ -x "$bin/twice-server" ] || "$root/scripts/build.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/twice-agree.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

models=""
for dir in "$root"/models/*/; do
  name=$(basename "$dir")
  [ -f "$dir/config.json" ] && models="${models:+$models,}$name=${dir%/}"
done

answers() {  # answers DTYPE OUT
  "$bin/twice-server" --listen=127.0.0.1:0 --data_dir="$work/store-$1" \
    --weights_dtype="$1" --model="$models" >"$work/stdout-$1" 2>"$work/log-$1" &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "listening on" "$work/stdout-$1" && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/log-$1" >&2; exit 1; }
    sleep 0.1
  done
  local address
  address=$(sed -n 's/^twice-server listening on //p' "$work/stdout-$1")
  "$bin/twice" eval "$set_path" --server="$address" --eval_answers="$2" \
    >"$work/eval-$1.txt"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}

answers f32 "$work/f32.jsonl"
answers "$dtype" "$work/$dtype.jsonl"
/usr/bin/python3 - "$work/f32.jsonl" "$work/$dtype.jsonl" "$dtype" <<'PY'
import collections, json, sys
def load(path):
    return [json.loads(line) for line in open(path)]
a, b, dtype = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
assert len(a) == len(b), (len(a), len(b))
by = collections.defaultdict(lambda: [0, 0, 0, 0])
for x, y in zip(a, b):
    assert (x["model"], x["mode"], x["question"]) == (y["model"], y["mode"], y["question"])
    first = lambda t: (t["answer"].split() or [""])[0]
    c = by[x["model"]]
    c[0] += 1
    c[1] += x["answer"] == y["answer"]
    c[2] += first(x) == x["expected"]
    c[3] += first(y) == y["expected"]
print(f"{'model':18} {'answers':>7} {'identical':>9} {'f32 acc':>8} {dtype + ' acc':>9}")
total = [0, 0]
for model, (n, same, ca, cb) in sorted(by.items()):
    print(f"{model:18} {n:7d} {100 * same / n:8.1f}% {100 * ca / n:7.1f}% {100 * cb / n:8.1f}%")
    total[0] += n
    total[1] += same
print(f"{'all':18} {total[0]:7d} {100 * total[1] / total[0]:8.1f}%")
PY
