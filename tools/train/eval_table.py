"""Markdown tables from `twice eval --json` output (one JSON object per
cell on stdin): one row per model x mode x facts, one column per length
multiple, each cell "accuracy % (questions)"; then tokens prefilled per
question by model x mode x length.

  twice eval tests/data/eval/full.jsonl --json | python3 tools/train/eval_table.py
"""

import collections
import json
import sys


def main():
    cells = [json.loads(line) for line in sys.stdin if line.strip().startswith("{")]
    mults = sorted({c["length_multiple"] for c in cells})
    rows = collections.OrderedDict()
    prefill = collections.OrderedDict()
    for c in sorted(cells, key=lambda c: (c["model"], c["mode"], c["facts"], c["length_multiple"])):
        rows.setdefault((c["model"], c["mode"], c["facts"]), {})[c["length_multiple"]] = c
        prefill.setdefault((c["model"], c["mode"]), {})[c["length_multiple"]] = c
    head = "| model | mode | facts | " + " | ".join(f"{m}x" for m in mults) + " |"
    print(head)
    print("|" + " --- |" * (3 + len(mults)))
    for (model, mode, facts), by in rows.items():
        vals = []
        for m in mults:
            c = by.get(m)
            vals.append("" if c is None else f"{100 * c['accuracy']:.1f} ({c['questions']})")
        print(f"| {model} | {mode} | {facts} | " + " | ".join(vals) + " |")
    print()
    print("| model | mode | " + " | ".join(f"{m}x tokens / prefilled per question" for m in mults) + " |")
    print("|" + " --- |" * (2 + len(mults)))
    for (model, mode), by in prefill.items():
        vals = []
        for m in mults:
            c = by.get(m)
            vals.append("" if c is None else f"{c['doc_tokens']:.0f} / {c['tokens_prefilled_per_question']:.0f}")
        print(f"| {model} | {mode} | " + " | ".join(vals) + " |")


if __name__ == "__main__":
    main()
