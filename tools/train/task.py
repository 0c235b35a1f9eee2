"""The synthetic document-QA task: vocabulary, tokenizer.json, documents,
questions and the training formats of every ask mode.

A document is a shuffled list of facts ("<key> is <value> .") and filler
sentences ("the river was quiet today ."); a question asks for one key's
value ("what is <key> ?") and the answer is the value. Keys inside one
document are distinct. Every word is one token of a WordLevel tokenizer
(WhitespaceSplit), so token counts are word counts.

Held-out pairs: a (key, value) pair with pair_is_held_out(k, v) never occurs
in a training document; every eval question asks about a held-out pair, so
eval answers are never memorised combinations.

The prompt templates (config.json "twice.prompt_templates", used by the
orchestrator) and the training formats agree token for token:

  mode              tokens the model reads, then generates the answer
  default           DOC Q: q A:
  read_twice        DOC Q: q D: DOC Q: q A:
  read_twice_full   Q: q D: DOC D: DOC Q: q A:
  prefix (JRT)      [pads] DOC (non-causal encoder over the first M) Q: q A:
  prefix_with_question (JRT)
                    [pads] Q: q D: DOC (encoder over the first M) Q: q A:

where q = "what is <key> ?". Pure Python (no torch), so CI can test it
quickly.
"""

from __future__ import annotations

import json
import random
from typing import Dict, List, Sequence, Tuple

N_KEYS = 32
N_VALUES = 32

QUESTION_PROMPT = " Q: {question} A:"
READ_TWICE_PREAMBLE = " Q: {question} D:"
DOCUMENT_SEPARATOR = " D:"

SPECIALS = ["[UNK]", "[PAD]", "[MASK]", "</s>"]
MARKERS = ["Q:", "A:", "D:", "what", "is", "?", "."]
FILLER_WORDS = (
    "the a river hill town road sky wind rain sun moon tree stone field "
    "was were quiet bright dark cold warm long short old new today again "
    "slowly and then near far over under green grey blue small large"
).split()

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"]
_VOWELS = ["a", "e", "i", "o", "u"]


def _words(count: int, seed: int, suffix: str) -> List[str]:
    """`count` distinct pronounceable words (consonant-vowel syllables)."""
    rng = random.Random(seed)
    out: List[str] = []
    seen = set()
    while len(out) < count:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(2)) + suffix
        if w not in seen and w not in FILLER_WORDS:
            seen.add(w)
            out.append(w)
    return out


KEYS = _words(N_KEYS, 1, "n")  # e.g. "bakon"
VALUES = _words(N_VALUES, 2, "x")  # e.g. "tirex"


def vocabulary() -> List[str]:
    return SPECIALS + MARKERS + FILLER_WORDS + KEYS + VALUES


def token_ids() -> Dict[str, int]:
    return {w: i for i, w in enumerate(vocabulary())}


def tokenizer_json() -> dict:
    vocab = token_ids()
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": vocab[s], "content": s, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
            for s in SPECIALS
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }


def prompt_templates() -> dict:
    return {
        "question_prompt": QUESTION_PROMPT,
        "read_twice_preamble": READ_TWICE_PREAMBLE,
        "document_separator": DOCUMENT_SEPARATOR,
    }


def pair_is_held_out(key: int, value: int) -> bool:
    """One pair in eight is reserved for eval (a fixed pattern of both)."""
    return (key * 7 + value * 13) % 8 == 0


def question_text(key: int) -> str:
    return f"what is {KEYS[key]} ?"


def fact_words(key: int, value: int) -> List[str]:
    return [KEYS[key], "is", VALUES[value], "."]


def make_document(
    rng: random.Random,
    n_facts: int,
    length: int,
    held_out: bool,
    allowed_keys: Sequence[int] = (),
) -> Tuple[List[str], List[Tuple[int, int, int]]]:
    """A document of exactly `length` words with `n_facts` facts (distinct
    keys, drawn from allowed_keys when given) and filler sentences between
    them.

    held_out=False: no fact is a held-out pair (training). held_out=True:
    every fact is a held-out pair (eval; no fact was seen in training).
    Returns the words and the facts as (key, value, word offset)."""
    assert 4 * n_facts <= length, (n_facts, length)
    keys = rng.sample(list(allowed_keys) or range(N_KEYS), n_facts)
    facts = []
    for k in keys:
        while True:
            v = rng.randrange(N_VALUES)
            if pair_is_held_out(k, v) == held_out:
                break
        facts.append((k, v))
    filler = length - 4 * n_facts
    # Split the filler into n_facts + 1 gaps, each gap a run of sentences.
    cuts = sorted(rng.randint(0, filler) for _ in range(n_facts))
    gaps = [b - a for a, b in zip([0] + cuts, cuts + [filler])]
    words: List[str] = []
    placed = []
    for i, gap in enumerate(gaps):
        words += _filler(rng, gap)
        if i < n_facts:
            k, v = facts[i]
            placed.append((k, v, len(words)))
            words += fact_words(k, v)
    assert len(words) == length
    return words, placed


def _filler(rng: random.Random, n: int) -> List[str]:
    """n filler words: sentences of 3..8 words ending in "."; the last one
    may be cut short (a gap of one word is a lone ".")."""
    out: List[str] = []
    while len(out) < n:
        s = [rng.choice(FILLER_WORDS) for _ in range(rng.randint(2, 7))] + ["."]
        out += s
    out = out[:n]
    if out:
        out[-1] = "."
    return out


# ------------------------------------------------------------------ eval set


def eval_records(
    seed: int,
    facts_list: Sequence[int],
    base_length: int,
    multiples: Sequence[int],
    docs_per_cell: int,
    questions_per_doc: int,
    last_segment_only: bool = False,
    earlier_facts: int = 0,
) -> List[dict]:
    """One record per document. Every question asks about a held-out pair.
    last_segment_only: the asked facts all lie in the last base_length words
    (the rest is filler), to test reading past the training length.
    earlier_facts > 0 (with last_segment_only): the words before the last
    window are whole base_length documents of that many facts each, whose
    keys differ from the last window's (so every asked key occurs once):
    a stream of documents, asked about the latest, whose earlier facts a
    state must let go of."""
    rng = random.Random(seed)
    records = []
    for mult in multiples:
        length = base_length * mult
        for n_facts in facts_list:
            for d in range(docs_per_cell):
                if last_segment_only and earlier_facts:
                    tail, facts = make_document(rng, n_facts, base_length, True)
                    asked_keys = {k for k, _, _ in facts}
                    others = [k for k in range(N_KEYS) if k not in asked_keys]
                    head = []
                    for _ in range(mult - 1):
                        head += make_document(rng, earlier_facts, base_length, True, others)[0]
                    words = head + tail
                    facts = [(k, v, p + len(head)) for k, v, p in facts]
                elif last_segment_only:
                    head = _filler(rng, length - base_length)
                    tail, facts = make_document(rng, n_facts, base_length, True)
                    words = head + tail
                    facts = [(k, v, p + len(head)) for k, v, p in facts]
                else:
                    words, facts = make_document(rng, n_facts, length, True)
                asked = rng.sample(facts, min(questions_per_doc, len(facts)))
                records.append({
                    "doc_id": f"s{seed}-x{mult}-f{n_facts}-d{d}",
                    "text": " ".join(words),
                    "facts": n_facts,
                    "doc_tokens": length,
                    "length_multiple": mult,
                    "questions": [
                        {"question": question_text(k), "answer": VALUES[v],
                         "fact_token": p}
                        for k, v, p in asked
                    ],
                })
    return records


# ------------------------------------------------------------ training data


def _qa(key: int, value: int, vocab: Dict[str, int]) -> Tuple[List[int], List[int]]:
    """Tokens of " Q: what is K ? A: V" and the loss mask (1 on V only)."""
    words = ["Q:", "what", "is", KEYS[key], "?", "A:", VALUES[value]]
    return [vocab[w] for w in words], [0] * 6 + [1]


def training_example(
    rng: random.Random,
    fmt: str,
    doc_len: int,
    vocab: Dict[str, int],
    max_facts: int,
    max_doc_len: int = 0,
    max_questions: int = 8,
    answer_after_fact: List[int] = None,
    question_held: List[int] = None,
) -> Tuple[List[int], List[int], int]:
    """One training sequence in format `fmt` (default, read_twice,
    read_twice_full, question_first, prefix, prefix_with_question) and its
    loss mask (1 on answer tokens).

    The document has max_facts / 2 .. max_facts facts and at most max_doc_len (0 =
    doc_len) words. default / prefix: the document, then questions about up
    to max_questions distinct facts, each followed by its answer (a key is
    never asked twice, so an answer cannot be copied from an earlier one).
    read_twice / read_twice_full: the question, the document read again (or
    twice after the question) and that one question. prefix: the document
    is left-padded with [PAD] to max_doc_len words, the encoder region
    (the serving encoder covers min(M, N) = M words of a document of
    N >= M = doc_len words, with no pads). prefix_with_question: the
    preamble "Q: q D:" and the document, left-padded to max_doc_len + 6
    words, so the encoder knows the question while it reads; then that one
    question (the serving recipe of the mode of that name).
    answer_after_fact: if a list is given, it receives the positions whose
    logits should already name the answer in the formats where the question
    comes before a reading of the document (read_twice, read_twice_full,
    question_first): every position of the last reading from the asked
    fact's value on, up to the position before the final "A:" (that one
    is in the mask). Nothing for default and prefix.
    question_held: likewise, the positions of the last reading before that
    value, whose logits should name the asked key (the question kept in
    mind while reading).
    Returns tokens, mask and the encoder region length (0 unless prefix)."""
    cap = max_doc_len or doc_len
    hi = min(max_facts, cap // 4)
    n = rng.randint(max(1, (hi + 1) // 2), hi)
    length = rng.randint(max(4 * n, cap // 4), cap)
    words, facts = make_document(rng, n, length, held_out=False)
    doc = [vocab[w] for w in words]
    asked = rng.sample(facts, min(max_questions, len(facts)))
    k0 = asked[0][0]
    pre = [vocab[w] for w in ["Q:", "what", "is", KEYS[k0], "?", "D:"]]
    prefix_len = 0
    if fmt in ("read_twice", "read_twice_full", "question_first"):
        # The last reading of the document ends the tokens built below.
        last_read = len(doc) + len(pre) if fmt == "read_twice" else len(pre)
        if fmt == "read_twice_full":
            last_read += len(doc) + 1
        value_at = last_read + asked[0][2] + 2
        # read_twice and read_twice_full end with " Q: what is K ?" before "A:".
        tail = 5 if fmt != "question_first" else 0
        if answer_after_fact is not None:
            answer_after_fact.extend(range(value_at, last_read + len(doc) + tail))
        if question_held is not None:
            question_held.extend(range(last_read, value_at))
    if fmt == "default":
        tokens = list(doc)
    elif fmt == "read_twice":
        tokens = doc + pre + doc
        asked = asked[:1]
    elif fmt == "read_twice_full":
        tokens = pre + doc + [vocab["D:"]] + doc
        asked = asked[:1]
    elif fmt == "question_first":
        # The question, one reading of the document, then "A:" and the
        # answer: the question is NOT repeated, so the answer can only come
        # from what was kept while reading with the question in mind — the
        # skill read_twice's second pass relies on. Not an ask mode.
        tokens = pre + doc + [vocab["A:"], vocab[task_value(asked[0][1])]]
        mask = [0] * (len(tokens) - 1) + [1]
        return tokens, mask, 0
    elif fmt == "prefix":
        # Left-padded to the cap: the batch's encoder region is one length.
        tokens = [vocab["[PAD]"]] * (cap - len(doc)) + doc
        prefix_len = cap
    elif fmt == "prefix_with_question":
        tokens = [vocab["[PAD]"]] * (cap - len(doc)) + pre + doc
        prefix_len = cap + len(pre)
        asked = asked[:1]
    else:
        raise ValueError(fmt)
    mask = [0] * len(tokens)
    for k, v, _ in asked:
        q, m = _qa(k, v, vocab)
        tokens += q
        mask += m
    return tokens, mask, prefix_len


def task_value(value: int) -> str:
    return VALUES[value]


def write_tokenizer(path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(), f, indent=1)
