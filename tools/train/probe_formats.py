"""In-process accuracy of a trained model directory on every reading order,
including one no ask mode serves: `question_first` (Q: q D: DOC A:, the
question not repeated), which only a model that stores selectively while
reading can answer. A diagnostic for training experiments; the figures in
models/README.md come from `twice eval` through the API.

  /usr/bin/python3 tools/train/probe_formats.py models/mamba2-rt [--doc-len 128]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import task  # noqa: E402
from train import build_model, init_from  # noqa: E402


def reading_orders(doc, question, vocab):
    """Token rows of each reading order for one document and question."""
    d, a = vocab["D:"], vocab["A:"]
    return {
        "default": doc + question + [a],
        "read_twice": doc + question + [d] + doc + question + [a],
        "read_twice_full": question + [d] + doc + [d] + doc + question + [a],
        "question_first": question + [d] + doc + [a],
    }


@torch.no_grad()
def probe(model_dir, doc_len, facts_list, questions, seed):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = cfg.get("architecture", "llama")
    model = build_model(arch, cfg, 0)
    init_from(model, model_dir)
    vocab = task.token_ids()
    rng = random.Random(seed)
    table = {}
    for n_facts in facts_list:
        if 4 * n_facts > doc_len:
            continue
        rows, answers = {}, []
        for _ in range(questions):
            words, facts = task.make_document(rng, n_facts, doc_len, held_out=True)
            key, value, _ = rng.choice(facts)
            doc = [vocab[w] for w in words]
            question = [vocab[w] for w in ["Q:", "what", "is", task.KEYS[key], "?"]]
            for order, tokens in reading_orders(doc, question, vocab).items():
                rows.setdefault(order, []).append(tokens)
            answers.append(vocab[task.VALUES[value]])
        for order, batch in rows.items():
            logits, _ = model(torch.tensor(batch), None, keep=None, enc=0)
            hits = logits[:, -1, : len(vocab)].argmax(-1) == torch.tensor(answers)
            table.setdefault(order, {})[n_facts] = hits.float().mean().item()
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--doc-len", type=int, default=128)
    ap.add_argument("--facts", default="4,8,16,24,32")
    ap.add_argument("--questions", type=int, default=64, help="per fact count")
    ap.add_argument("--seed", type=int, default=99)
    args = ap.parse_args()
    torch.set_num_threads(1)
    facts_list = [int(x) for x in args.facts.split(",")]
    table = probe(args.model_dir, args.doc_len, facts_list, args.questions, args.seed)
    counts = [n for n in facts_list if 4 * n <= args.doc_len]
    print(f"{args.model_dir}: {args.questions} held-out questions per cell, "
          f"{args.doc_len}-word documents, seed {args.seed}")
    print("| order | " + " | ".join(f"{n} facts" for n in counts) + " |")
    print("| --- |" + " --- |" * len(counts))
    for order, cells in table.items():
        print(f"| {order} | " + " | ".join(f"{100 * cells[n]:.1f}" for n in counts) + " |")


if __name__ == "__main__":
    main()
