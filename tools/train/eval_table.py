"""Markdown tables from `twice eval --json` output (one JSON object per
cell on stdin): one row per model x mode x facts, one column per length
multiple, each cell "accuracy % (questions)"; then tokens prefilled per
question by model x mode x length; then, per model, the read-twice gain
pooled over the cells (facts x length) where the default mode is under
60 % (the first target of models/README.md).

  twice eval tests/data/eval/full.jsonl --json | python3 tools/train/eval_table.py
"""

import collections
import json
import sys

FULL_STATE_BELOW = 0.60  # default-mode accuracy under which a cell counts


def read_twice_gain(cells):
    """Per model: (cells, questions, default %, read_twice %) pooled over
    the (facts, length) cells whose default accuracy is under
    FULL_STATE_BELOW; models without both modes are left out."""
    by = {(c["model"], c["mode"], c["facts"], c["length_multiple"]): c for c in cells}
    out = collections.OrderedDict()
    for model in sorted({c["model"] for c in cells}):
        n_cells = questions = once = twice = 0
        for (m, mode, facts, mult), c in sorted(by.items()):
            other = by.get((m, "read_twice", facts, mult))
            if m != model or mode != "default" or other is None:
                continue
            if c["accuracy"] >= FULL_STATE_BELOW:
                continue
            n_cells += 1
            questions += c["questions"]
            once += c["correct"]
            twice += other["correct"]
        if questions:
            out[model] = (n_cells, questions, 100 * once / questions, 100 * twice / questions)
    return out


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
    gains = read_twice_gain(cells)
    if gains:
        print()
        print(f"| model | cells with default < {100 * FULL_STATE_BELOW:.0f} % | questions "
              "| default | read_twice | gain (points) |")
        print("|" + " --- |" * 6)
        for model, (n, q, once, twice) in gains.items():
            print(f"| {model} | {n} | {q} | {once:.1f} | {twice:.1f} | {twice - once:+.1f} |")


if __name__ == "__main__":
    main()
