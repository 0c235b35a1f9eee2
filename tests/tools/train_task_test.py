"""The document-QA task generator (tools/train/task.py) and the committed
eval sets: exact lengths, held-out pairs, training formats that match the
prompt templates, and eval files that the generator reproduces byte for
byte. Pure Python (no torch): runs in CI without the training stack."""

import json
import os
import random
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))

import make_eval_set  # noqa: E402
import task  # noqa: E402


class TaskTest(unittest.TestCase):
    def test_vocabulary_is_unique_and_tokenizer_is_word_level(self):
        words = task.vocabulary()
        self.assertEqual(len(words), len(set(words)))
        tok = task.tokenizer_json()
        self.assertEqual(tok["model"]["type"], "WordLevel")
        self.assertEqual(tok["pre_tokenizer"]["type"], "WhitespaceSplit")
        self.assertEqual(sorted(tok["model"]["vocab"].values()), list(range(len(words))))

    def test_documents_have_exact_length_and_distinct_keys(self):
        rng = random.Random(5)
        for n_facts, length in [(1, 4), (2, 128), (24, 128), (8, 1024)]:
            words, facts = task.make_document(rng, n_facts, length, held_out=False)
            self.assertEqual(len(words), length)
            self.assertEqual(len({k for k, _, _ in facts}), n_facts)
            for k, v, p in facts:
                self.assertEqual(words[p:p + 4], task.fact_words(k, v))
                self.assertFalse(task.pair_is_held_out(k, v))

    def test_training_formats_match_the_prompt_templates(self):
        vocab = task.token_ids()
        inverse = {i: w for w, i in vocab.items()}
        rng = random.Random(9)
        for fmt in ("default", "read_twice", "read_twice_full", "prefix"):
            tokens, mask, prefix_len = task.training_example(rng, fmt, 128, vocab, 8)
            self.assertEqual(len(tokens), len(mask))
            # A key is asked at most once per sequence.
            asked = [tokens[i - 3] for i, m in enumerate(mask) if m]
            self.assertEqual(len(asked), len(set(asked)))
            self.assertGreater(len(asked), 0)
            text = " ".join(inverse[t] for t in tokens)
            # The first answer follows the question prompt exactly.
            first = mask.index(1)
            question = " ".join(inverse[t] for t in tokens[first - 6:first - 1])
            prompt = task.QUESTION_PROMPT.format(question=question[3:]).split()
            self.assertEqual([inverse[t] for t in tokens[first - 6:first]], prompt)
            self.assertIn(inverse[tokens[first]], task.VALUES)
            if fmt == "read_twice_full":
                self.assertTrue(text.startswith("Q: what is "))
            if fmt == "prefix":
                self.assertEqual(prefix_len, 128)

    def test_question_first_asks_before_the_document_only(self):
        vocab = task.token_ids()
        inverse = {i: w for w, i in vocab.items()}
        tokens, mask, prefix_len = task.training_example(
            random.Random(4), "question_first", 64, vocab, 8)
        words = [inverse[t] for t in tokens]
        self.assertEqual(words[:3], ["Q:", "what", "is"])
        key = words[3]
        # The question is not repeated: one "Q:", the answer right after "A:".
        self.assertEqual(words.count("Q:"), 1)
        self.assertEqual(words[-2], "A:")
        self.assertEqual(mask, [0] * (len(tokens) - 1) + [1])
        self.assertEqual(prefix_len, 0)
        fact = words.index(key, 4)
        self.assertEqual(words[fact + 2], words[-1])

    def test_prefix_with_question_puts_the_question_in_the_encoder_region(self):
        vocab = task.token_ids()
        inverse = {i: w for w, i in vocab.items()}
        for seed in range(10):
            tokens, mask, prefix_len = task.training_example(
                random.Random(seed), "prefix_with_question", 64, vocab, 8)
            words = [inverse[t] for t in tokens]
            # Left pads, then the preamble and the document: the region is
            # the cap plus the preamble's 6 words, whatever the document's
            # length.
            self.assertEqual(prefix_len, 64 + 6)
            start = words.index("Q:")
            self.assertEqual(words[:start], ["[PAD]"] * start)
            key = words[start + 3]
            self.assertEqual(words[start:start + 6], ["Q:", "what", "is", key, "?", "D:"])
            # One question after the region, the same one, then its answer.
            self.assertEqual(words[prefix_len:], ["Q:", "what", "is", key, "?", "A:", words[-1]])
            self.assertEqual(mask, [0] * (len(tokens) - 1) + [1])
            fact = words.index(key, start + 6)
            self.assertEqual(words[fact + 2], words[-1])

    def test_early_answer_positions_start_at_the_asked_value_of_the_last_reading(self):
        vocab = task.token_ids()
        inverse = {i: w for w, i in vocab.items()}
        for fmt in ("read_twice", "read_twice_full", "question_first"):
            for seed in range(20):
                positions = []
                tokens, mask, _ = task.training_example(
                    random.Random(seed), fmt, 128, vocab, 8, answer_after_fact=positions)
                words = [inverse[t] for t in tokens]
                first = mask.index(1)
                answer = words[first]
                asked_key = words[3] if fmt == "question_first" else words[first - 3]
                # One contiguous run, ending right before the answer's "A:".
                self.assertEqual(words[first - 1], "A:")
                self.assertEqual(positions, list(range(positions[0], first - 1)), fmt)
                # It starts at the asked fact's value ("K is V") in the last
                # reading: no "D:" (a further reading) follows it.
                start = positions[0]
                self.assertEqual(words[start - 2:start + 1], [asked_key, "is", answer], fmt)
                self.assertNotIn("D:", words[start:])
        positions = []
        task.training_example(random.Random(1), "default", 128, vocab, 8,
                              answer_after_fact=positions)
        self.assertEqual(positions, [])

    def test_eval_questions_ask_held_out_pairs_in_their_document(self):
        recs = task.eval_records(3, [2, 8], 128, [1, 2], 2, 4)
        key_of = {w: i for i, w in enumerate(task.KEYS)}
        value_of = {w: i for i, w in enumerate(task.VALUES)}
        for r in recs:
            words = r["text"].split()
            self.assertEqual(len(words), r["doc_tokens"])
            for q in r["questions"]:
                key = q["question"].split()[2]
                self.assertTrue(task.pair_is_held_out(key_of[key], value_of[q["answer"]]))
                p = q["fact_token"]
                self.assertEqual(words[p:p + 4], [key, "is", q["answer"], "."])
        last = task.eval_records(3, [8], 128, [4], 2, 4, last_segment_only=True)
        for r in last:
            for q in r["questions"]:
                self.assertGreaterEqual(q["fact_token"], r["doc_tokens"] - 128)
        after = task.eval_records(3, [8], 128, [4], 2, 4, last_segment_only=True,
                                  earlier_facts=8)
        for r in after:
            words = r["text"].split()
            self.assertEqual(len(words), 4 * 128)
            # 8 facts in each earlier document, 8 in the last window; an
            # asked key occurs once, at the asked fact in the last window.
            self.assertEqual(words.count("is"), 4 * 8)
            for q in r["questions"]:
                key = q["question"].split()[2]
                p = q["fact_token"]
                self.assertGreaterEqual(p, r["doc_tokens"] - 128)
                self.assertEqual(words[p:p + 4], [key, "is", q["answer"], "."])
                self.assertEqual(words.count(key), 1)

    def test_committed_eval_sets_are_reproducible(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in make_eval_set.SETS:
                path = os.path.join(tmp, name + ".jsonl")
                make_eval_set.write_set(path, name, make_eval_set.TRAINING_LENGTH)
                committed = os.path.join(ROOT, "tests", "data", "eval", name + ".jsonl")
                with open(path, "rb") as a, open(committed, "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_shipped_models_carry_the_task_tokenizer_and_templates(self):
        models = os.path.join(ROOT, "models")
        found = 0
        for name in sorted(os.listdir(models)):
            d = os.path.join(models, name)
            if not os.path.exists(os.path.join(d, "training.json")):
                continue
            found += 1
            with open(os.path.join(d, "tokenizer.json")) as f:
                self.assertEqual(json.load(f), task.tokenizer_json())
            with open(os.path.join(d, "config.json")) as f:
                cfg = json.load(f)
            self.assertEqual(cfg["twice"]["prompt_templates"], task.prompt_templates())
            self.assertLessEqual(os.path.getsize(os.path.join(d, "model.safetensors")), 5 << 20)
        self.assertGreater(found, 0)


if __name__ == "__main__":
    unittest.main()
