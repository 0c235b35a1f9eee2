#!/usr/bin/env python3
"""Markdown table of a fault campaign (scripts/fault_campaign.sh): one row
per run from DIR/<kind>.json (twice-bench load --json) and DIR/<kind>.faults.

    scripts/fault_summary.py DIR KIND [KIND ...]
"""
import json
import sys


def mib(x):
    return "-" if x is None or x < 0 else f"{x / 2**20:.0f}"


def row(out_dir, kind):
    try:
        with open(f"{out_dir}/{kind}.json", encoding="utf-8") as f:
            lines = [l for l in f if l.startswith("{")]
        r = json.loads(lines[-1])
    except (OSError, IndexError, ValueError) as e:
        return f"| {kind} | (no result: {e}) |" + " |" * 10
    try:
        with open(f"{out_dir}/{kind}.faults", encoding="utf-8") as f:
            faults = sum(1 for _ in f)
    except OSError:
        faults = 0
    if "error" in r:
        return f"| {kind} | (run failed: {r['error']}) |" + " |" * 10
    ops = r["ops"]
    calls = sum(o["calls"] for o in ops.values())
    ok = sum(o["ok"] for o in ops.values())
    asks = [o for k, o in ops.items() if k.startswith("ask:")]
    ttft = max((o["ttft_ms_p99"] for o in asks), default=0)
    errors = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "none"
    mem = "; ".join(
        f"{m['endpoint'].rsplit(':', 1)[1]}: {mib(m['start_bytes'])}→{mib(m['peak_bytes'])}→{mib(m['end_bytes'])}"
        for m in r["memory"])
    return (f"| {kind} | {r['seconds'] / 60:.1f} | {calls} ({calls / r['seconds']:.1f}/s), {ok} ok "
            f"| {ttft:.0f} | {faults} | {errors} | {r['unclean_errors']} "
            f"| {r.get('states_recomputed', '-')} | {r['documents_verified']} / {r['documents_lost']} "
            f"| {r['answers']} / {r['answers_compared_to_baseline']} / "
            f"{r['answers_differ_in_run'] + r['answers_differ_from_baseline']} | {mem} |")


def main():
    out_dir, kinds = sys.argv[1], sys.argv[2:]
    print("| run | minutes | calls (rate), ok | ask TTFT p99 ms (worst mode) | faults injected "
          "| failed calls by status | unclean | states recomputed | documents checked / lost "
          "| answers / compared with baseline / changed | RSS MiB start→peak→end per metrics port |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in kinds:
        print(row(out_dir, kind))


if __name__ == "__main__":
    main()
