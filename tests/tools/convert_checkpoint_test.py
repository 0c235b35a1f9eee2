#!/usr/bin/python3
"""Tests tools/convert/convert_checkpoint.py on upstream-shaped checkpoints.

A tiny random Based / JRT model (tools/reference/make_golden.py's weights) is
saved the way upstream checkpoints come: torch pickles, names with the
Lightning "model." prefix, a training-metric entry, the legacy "conv1" name,
a tied lm_head sharing the embedding's storage, sometimes nested under
"state_dict". The converted directory must hold the canonical names with the
original dtype and bytes, and the reference model must read it to the same
logits as the unconverted weights.

Exits 77 (ctest: skipped) when Debian's python3-torch is not installed
(scripts/setup.sh --tools installs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:
    print("skipped: python3-torch is not installed (scripts/setup.sh --tools)")
    sys.exit(77)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

from reference import make_golden  # noqa: E402
from reference.model import EMBEDDING, LM_HEAD, ReferenceModel  # noqa: E402
from reference.safetensors_io import read_safetensors  # noqa: E402

CONVERTER = os.path.join(REPO, "tools", "convert", "convert_checkpoint.py")
CONV_WEIGHT = "transformer.layers.0.mixer.conv.conv.weight"


def run_converter(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, CONVERTER, *args], capture_output=True, text=True, check=False
    )


class ConvertCheckpointTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.src = os.path.join(self.tmp.name, "src")
        self.out = os.path.join(self.tmp.name, "out")
        os.makedirs(self.src)

    def tearDown(self):
        self.tmp.cleanup()

    def write_source(self, arch: str, dtype: torch.dtype, nested: bool = False,
                     config: dict | None = None) -> dict:
        """Saves an upstream-style checkpoint; returns its canonical weights."""
        cfg = config or make_golden.model_config(arch)
        weights = make_golden.random_weights(cfg, seed=7, dtype=dtype)
        legacy = CONV_WEIGHT.replace("conv.conv", "conv1.conv")  # pre-rename name
        stored = {"model." + n.replace(CONV_WEIGHT, legacy): t for n, t in weights.items()}
        stored["model." + LM_HEAD] = weights[EMBEDDING]  # tied: one storage
        stored["train_metrics.num-tokens.count"] = torch.tensor(5.0)
        obj = {"state_dict": stored, "epoch": 3} if nested else stored
        torch.save(obj, os.path.join(self.src, "pytorch_model.bin"))
        with open(os.path.join(self.src, "config.json"), "w") as f:
            json.dump(cfg, f)
        with open(os.path.join(self.src, "tokenizer.json"), "w") as f:
            f.write(make_golden.tokenizer_json())
        return weights

    def assert_converted(self, weights: dict) -> None:
        got, meta = read_safetensors(os.path.join(self.out, "model.safetensors"))
        self.assertEqual(meta, {"format": "pt"})
        self.assertEqual(sorted(got), sorted(weights))  # lm_head and metrics gone
        for name, t in weights.items():
            self.assertEqual(got[name].dtype, t.dtype, name)
            self.assertTrue(torch.equal(got[name], t), name)
        for name in ("config.json", "tokenizer.json"):
            with open(os.path.join(self.src, name), "rb") as a, open(
                os.path.join(self.out, name), "rb"
            ) as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_based_bf16_keeps_names_dtype_and_bytes(self):
        weights = self.write_source("based", torch.bfloat16)
        r = run_converter(self.src, self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dropped lm_head.weight", r.stdout)
        self.assert_converted(weights)

    def test_nested_jrt_f16_checkpoint_reads_to_the_same_logits(self):
        weights = self.write_source("jrt", torch.float16, nested=True)
        r = run_converter(os.path.join(self.src, "pytorch_model.bin"), self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_converted(weights)
        # The reference reads the converted directory and the source weights
        # (as make_golden writes them) to identical logits.
        make_golden.write_model(os.path.join(self.tmp.name, "direct"),
                                make_golden.model_config("jrt"), weights)
        tokens = [5, 6, 7, 220, 9]
        logits = []
        for d in (self.out, os.path.join(self.tmp.name, "direct")):
            m = ReferenceModel.from_dir(d)
            logits.append(m.prefill(tokens, m.new_state(), "prefix"))
        self.assertTrue(torch.equal(logits[0], logits[1]))

    def test_f32_kept_and_dtype_conversion_on_request(self):
        self.write_source("based", torch.float32)
        r = run_converter(self.src, self.out, "--dtype", "bf16")
        self.assertEqual(r.returncode, 0, r.stderr)
        got, _ = read_safetensors(os.path.join(self.out, "model.safetensors"))
        self.assertTrue(all(t.dtype == torch.bfloat16 for t in got.values()))

    def test_float64_needs_an_explicit_dtype(self):
        self.write_source("based", torch.float64)
        r = run_converter(self.src, self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--dtype", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "model.safetensors")))

    def test_missing_and_misshaped_tensors_are_named(self):
        cfg = make_golden.model_config("based")
        cfg["n_inner"] = 300  # MLP width 512: every fc1 / fc2 is mis-shaped
        self.write_source("based", torch.float16)
        with open(os.path.join(self.src, "config.json"), "w") as f:
            json.dump(cfg, f)
        r = run_converter(self.src, self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("transformer.layers.0.mlp.fc1.weight is [512, 16], config implies [1024, 16]",
                      r.stderr)

    def test_jrt_config_on_based_weights_reports_missing_encoder(self):
        self.write_source("based", torch.float16)
        with open(os.path.join(self.src, "config.json"), "w") as f:
            json.dump(make_golden.model_config("jrt"), f)
        r = run_converter(self.src, self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing transformer.layers.1.mixer.proj_k_enc.weight", r.stderr)

    def test_untrusted_pickle_objects_are_refused_by_default(self):
        torch.save({"state_dict": {}, "hparams": argparse_like()},
                   os.path.join(self.src, "pytorch_model.bin"))
        with open(os.path.join(self.src, "config.json"), "w") as f:
            json.dump(make_golden.model_config("based"), f)
        r = run_converter(self.src, self.out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--trust-pickle", r.stderr)


class _Hparams:
    pass


def argparse_like() -> _Hparams:
    """A non-tensor object in a checkpoint, as Lightning stores its hparams."""
    h = _Hparams()
    h.lr = 1e-3
    return h


if __name__ == "__main__":
    unittest.main()
