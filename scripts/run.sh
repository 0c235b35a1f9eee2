#!/usr/bin/env bash
# Sets up, builds (Release) and runs the whole Twice pipeline
# (twice-server --role=all) on 127.0.0.1:50051, serving until Ctrl-C. The
# models are the trained document-QA models shipped in models/ (see
# models/README.md); the first, nemotron-h-qa (the most accurate in the
# default ask mode), is the default.
#
#   scripts/run.sh          serve
#   scripts/run.sh --demo   serve, ingest a sample document, ask sample
#                           questions in each available mode, print the
#                           answers with what was reused, stop, exit 0
#
# Environment: TWICE_LISTEN (default 127.0.0.1:50051), TWICE_DATA_DIR
# (default ./twice-data; the demo uses a fresh temporary directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Serving needs two programs: the server and the CLI (the demo's client).
# The tests, benchmarks and CUDA targets are scripts/test.sh's to build.
TWICE_BUILD_TARGETS="twice-server twice" "$root/scripts/build.sh"
bin=${TWICE_BUILD_DIR:-$root/build}/services
listen=${TWICE_LISTEN:-127.0.0.1:50051}
# NAME=DIR for every shipped model; the first is the default.
models=""
for name in nemotron-h-qa jrt-lm based-lm based-rt-f16 jrt-qa based-qa jrt-qa-scratch mamba2-qa \
  mamba2-qa-no-sp mamba2-sp mamba2-no-sp llama-qa based-rt-f4 mamba2-rt-s32 mamba2-rt-s8 \
  jrt-f2-w16 based-f2-w16; do
  if [ -f "$root/models/$name/model.safetensors" ]; then
    models="${models:+$models,}$name=$root/models/$name"
  fi
done
model_flag=()
[ -n "$models" ] && model_flag=(--model="$models")

if [ "${1:-}" != "--demo" ]; then
  exec "$bin/twice-server" --role=all --listen="$listen" "${model_flag[@]}" \
    --data-dir="${TWICE_DATA_DIR:-$root/twice-data}"
fi

data_dir=$(mktemp -d)
log="$data_dir/server.log"
"$bin/twice-server" --role=all --listen="$listen" "${model_flag[@]}" \
  --data-dir="$data_dir/store" \
  >"$data_dir/server.out" 2>"$log" &
server_pid=$!
cleanup() {
  kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  rm -rf "$data_dir"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
  grep -q "listening on" "$data_dir/server.out" 2>/dev/null && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "demo: twice-server did not start:" >&2; cat "$log" >&2; exit 1
  fi
  sleep 0.2
done
address=$(sed -n 's/^twice-server listening on //p' "$data_dir/server.out")
twice() { "$bin/twice" --server="$address" "$@"; }

echo "== health"
twice health
echo "== models"
twice models
echo "== ingest scripts/demo/qa_document.txt (a document of the task the"
echo "   default model was trained on: facts \"<key> is <value> .\" among filler)"
doc=$(twice ingest "$root/scripts/demo/qa_document.txt" | cut -f1)
twice docs
echo
echo "Expected answers: kurun -> tabux, muzan -> fifex (8 facts in 128 words: the"
echo "tiny default model answers nearly all such questions, see models/README.md)."
# The modes the default model serves; the prefix modes (a non-causal
# encoding of the document) need a JRT-RNN model, so when the default is
# not one, they are asked of the document ingested again into jrt-lm.
default_modes=$(twice models --json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
modes = next(x["modes"] for x in m["models"] if x["name"] == m["default_model"])
print(" ".join(x.removeprefix("ASK_MODE_").lower() for x in modes))')
prefix_doc=$doc
case " $default_modes " in
  *" prefix "*) ;;
  *)
    if [[ "$models" == *jrt-lm=* ]]; then
      echo
      echo "== ingest the same document into jrt-lm (JRT-RNN) for the prefix modes"
      prefix_doc=$(twice ingest "$root/scripts/demo/qa_document.txt" --model=jrt-lm | cut -f1)
    else
      prefix_doc=
    fi ;;
esac
for mode in default read_twice read_twice_full prefix prefix_with_question; do
  target=$doc
  [[ "$mode" == prefix* ]] && target=$prefix_doc
  [ -n "$target" ] || continue
  for question in "what is kurun ?" "what is muzan ?"; do
    echo
    echo "== ask --mode=$mode \"$question\""
    twice ask "$target" "$question" --mode="$mode" --max-tokens=2
  done
done
echo
echo "== ask again: the document state is reused, only the question is read"
twice ask "$doc" "what is kurun ?" --max-tokens=2 --json
echo
echo "demo: done"
