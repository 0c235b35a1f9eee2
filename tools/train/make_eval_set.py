"""Write the document-QA eval sets (JSON lines) that `twice eval` reads.

  /usr/bin/python3 tools/train/make_eval_set.py --out-dir tests/data/eval

Sets (fixed seeds; every question asks about a held-out (key, value) pair):
  ci.jsonl            the CI eval: 1x the training length, 2 and 8 facts,
                      60 documents, up to 4 questions each (seed 1101)
  ci_read_twice.jsonl the CI check of the read-twice effect: 1x, 16 and 24
                      facts (more than a small state holds), 30 documents,
                      4 questions each (seed 1104)
  full.jsonl          facts 2 / 8 / 16 / 24 x length 1x / 2x / 4x / 8x,
                      6 documents per cell, 4 questions each (seed 1202)
  last_segment.jsonl  facts 8 and 16 placed in the last training-length
                      window of documents 1x / 2x / 4x / 8x long (the rest
                      filler), 12 documents per cell, 4 questions (seed 1303)
  after_documents.jsonl
                      the same cells, but what comes before the last window
                      is other training-length documents of 8 facts each
                      (keys other than the asked ones): the state at 8x has
                      read 56 facts it must let go of (seed 1505)
Pure Python (no torch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import task  # noqa: E402

TRAINING_LENGTH = 128  # train.py --doc-len

SETS = {
    "ci": dict(seed=1101, facts_list=[2, 8], multiples=[1], docs_per_cell=30,
               questions_per_doc=4),
    "ci_read_twice": dict(seed=1104, facts_list=[16, 24], multiples=[1], docs_per_cell=15,
                          questions_per_doc=4),
    "full": dict(seed=1202, facts_list=[2, 8, 16, 24], multiples=[1, 2, 4, 8],
                 docs_per_cell=6, questions_per_doc=4),
    "last_segment": dict(seed=1303, facts_list=[8, 16], multiples=[1, 2, 4, 8],
                         docs_per_cell=12, questions_per_doc=4, last_segment_only=True),
    "after_documents": dict(seed=1505, facts_list=[8, 16], multiples=[1, 2, 4, 8],
                            docs_per_cell=12, questions_per_doc=4, last_segment_only=True,
                            earlier_facts=8),
}


def write_set(path: str, name: str, base_length: int) -> int:
    spec = dict(SETS[name])
    records = task.eval_records(base_length=base_length, **spec)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            r["set"] = name
            r["seed"] = spec["seed"]
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return sum(len(r["questions"]) for r in records)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--training-length", type=int, default=TRAINING_LENGTH)
    ap.add_argument("--sets", default=",".join(SETS))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.sets.split(","):
        path = os.path.join(args.out_dir, name + ".jsonl")
        n = write_set(path, name, args.training_length)
        print(f"{path}: {n} questions")


if __name__ == "__main__":
    main()
