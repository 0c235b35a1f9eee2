#!/usr/bin/python3
"""Tests of the float64 reference (tools/reference) and its golden data.

- The committed tests/data/golden/ is what tools/reference/make_golden.py
  writes: model files byte for byte, manifests equal, arrays within float32
  rounding (make_golden also re-checks parallel vs recurrent forms, segment
  by segment vs whole, and steps vs parallel prefill while regenerating).
- Prefix linear attention matches a direct evaluation of its equations via
  the kernel identity phi(q).phi(k) = 1 + s + s^2/2, s = q.k / sqrt(F), with
  masked keys giving s = 0 (weight 1).
- The safetensors reader / writer round-trips every dtype.

Exits 77 (ctest: skipped) when Debian's python3-torch is not installed
(scripts/setup.sh --tools installs it).
"""

from __future__ import annotations

import json
import math
import os
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

from reference import layers, make_golden  # noqa: E402
from reference.config import parse_config  # noqa: E402
from reference.safetensors_io import read_safetensors, write_safetensors  # noqa: E402

GOLDEN = os.path.join(REPO, "tests", "data", "golden")


def without_margins(manifest: dict) -> dict:
    """The manifest minus the informative greedy margins (float text)."""
    for case in manifest["cases"]:
        case.pop("greedy_min_margin")
    return manifest


class GoldenDataTest(unittest.TestCase):
    def test_committed_golden_data_is_what_the_script_writes(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(make_golden.main(["make_golden.py", tmp]), 0)
            for arch in ("based", "jrt"):
                for name in ("config.json", "tokenizer.json", "model.safetensors"):
                    with open(os.path.join(tmp, arch, name), "rb") as a, open(
                        os.path.join(GOLDEN, arch, name), "rb"
                    ) as b:
                        self.assertEqual(a.read(), b.read(), f"{arch}/{name}")
                manifests = []
                for d in (tmp, GOLDEN):
                    with open(os.path.join(d, f"{arch}_golden.json")) as f:
                        manifests.append(without_margins(json.load(f)))
                self.assertEqual(manifests[0], manifests[1], arch)
                got, _ = read_safetensors(os.path.join(tmp, f"{arch}_golden.safetensors"))
                want, _ = read_safetensors(os.path.join(GOLDEN, f"{arch}_golden.safetensors"))
                self.assertEqual(sorted(got), sorted(want))
                for name in want:
                    scale = max(want[name].abs().max().item(), 1e-30)
                    err = (got[name] - want[name]).abs().max().item() / scale
                    self.assertLess(err, 1e-6, name)


class PrefixLinearAttentionTest(unittest.TestCase):
    def test_matches_the_kernel_identity_with_masked_keys(self):
        cfg = make_golden.model_config("jrt")
        w = {k: v.to(torch.float64) for k, v in
             make_golden.random_weights(cfg, 3, torch.float64).items()}
        heads, f = 4, 16
        la = layers.LinearAttention(w, "transformer.layers.1.", heads, 1e-12, prefix=True)
        t, enc, pads = 11, 8, 3
        x = torch.randn(t, 16, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        keep = torch.tensor([False] * pads + [True] * (t - pads))
        got = la.forward(x, la.new_state(), 0, keep=keep, enc=enc)

        q = (x @ la.wq.T).view(t, heads, f)
        kd = (x @ la.wk.T).view(t, heads, f) * keep[:, None, None]
        ke = (x @ la.wk_enc.T).view(t, heads, f) * keep[:, None, None]
        vd, ve = (x @ la.wv.T).view(t, heads, 4), (x @ la.wv_enc.T).view(t, heads, 4)
        y = torch.zeros(t, heads, 4, dtype=torch.float64)
        for h in range(heads):
            for i in range(t):
                num, den = torch.zeros(4, dtype=torch.float64), 0.0
                for keys, values, last in ((kd, vd, i), (ke, ve, enc - 1)):
                    for j in range(last + 1):
                        s = float(q[i, h] @ keys[j, h]) / math.sqrt(f)
                        a = 1 + s + s * s / 2
                        num += a * values[j, h]
                        den += a
                y[i, h] = num / den
        want = y.reshape(t, -1) @ la.wo.T
        self.assertLess((got - want).abs().max().item(), 1e-12)


class SafetensorsTest(unittest.TestCase):
    def test_round_trips_every_dtype(self):
        tensors = {
            "f64": torch.randn(2, 3, dtype=torch.float64),
            "f32": torch.randn(4, dtype=torch.float32),
            "bf16": torch.randn(3, 1, 2).to(torch.bfloat16),
            "f16": torch.randn(5).to(torch.float16),
            "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3),
            "empty": torch.zeros(0, 4),
            "scalar": torch.tensor(1.5),
        }
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            write_safetensors(path, tensors, {"k": "v"})
            with open(path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
            self.assertEqual(n % 8, 0)
            got, meta = read_safetensors(path)
        self.assertEqual(meta, {"k": "v"})
        for name, t in tensors.items():
            self.assertEqual(got[name].dtype, t.dtype, name)
            self.assertTrue(torch.equal(got[name], t), name)


class ConfigTest(unittest.TestCase):
    def test_upstream_gpt2_dumps_are_told_apart_by_the_mixer_class(self):
        based = {"model_type": "gpt2", "n_embd": 8, "n_layer": 2, "n_head": 2,
                 "vocab_size": 10, "alt_mixer": {"_target_": "x.LinearAttention"}}
        self.assertEqual(parse_config(json.dumps(based)).architecture, "based")
        jrt = dict(based, alt_mixer={"_target_": "x.PrefixLinearAttention", "enc_length": 64})
        c = parse_config(json.dumps(jrt))
        self.assertEqual((c.architecture, c.enc_length, c.pad_token_id), ("jrt", 64, 220))
        c = parse_config(json.dumps(dict(jrt, enc_length=32)))
        self.assertEqual(c.enc_length, 32)  # the top-level key wins


if __name__ == "__main__":
    unittest.main()
