#!/usr/bin/python3
"""Tests of the float64 Mamba-2 reference (tools/reference/mamba2.py) and its
golden data.

- The committed tests/data/golden/mamba2* is what
  tools/reference/make_golden_mamba2.py writes: model files byte for byte,
  manifests equal, arrays within float32 rounding.
- The chunked SSD form equals a direct evaluation of the unrolled recurrence
  y_t = sum_{s<=t} (C_t.B_s) exp(sum_{s<r<=t} a_r) delta_s x_s
        + exp(sum_{r<=t} a_r) C_t.S0 + D x_t
  with a non-zero initial state, ragged lengths and several chunk sizes;
  the step form equals it too.

Exits 77 (ctest: skipped) when Debian's python3-torch is not installed.
"""

from __future__ import annotations

import json
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

from reference import make_golden_mamba2, mamba2  # noqa: E402
from reference.safetensors_io import read_safetensors  # noqa: E402

GOLDEN = os.path.join(REPO, "tests", "data", "golden")


def direct(x, delta, a, b, c, d, s0):
    """The unrolled recurrence, O(T^2), no chunks."""
    t = x.shape[0]
    ad = delta * a  # [T, H]
    cum = torch.cumsum(ad, 0)
    y = torch.zeros_like(x)
    for i in range(t):
        y[i] = torch.einsum("hn,hpn->hp", c[i], s0) * torch.exp(cum[i])[:, None]
        for j in range(i + 1):
            decay = torch.exp(cum[i] - cum[j])  # [H]
            cb = (c[i] * b[j]).sum(-1)  # [H]
            y[i] += (cb * decay * delta[j])[:, None] * x[j]
        y[i] += d[:, None] * x[i]
    return y


class SsdFormsTest(unittest.TestCase):
    def test_chunked_and_step_equal_direct(self):
        g = torch.Generator().manual_seed(7)
        h, p, n = 3, 4, 5
        for t, chunk in [(12, 4), (13, 4), (7, 16), (9, 1)]:
            x = torch.randn(t, h, p, generator=g, dtype=torch.float64)
            delta = torch.rand(t, h, generator=g, dtype=torch.float64) + 0.1
            a = -torch.rand(h, generator=g, dtype=torch.float64) - 0.1
            b = torch.randn(t, h, n, generator=g, dtype=torch.float64)
            c = torch.randn(t, h, n, generator=g, dtype=torch.float64)
            d = torch.randn(h, generator=g, dtype=torch.float64)
            s0 = torch.randn(h, p, n, generator=g, dtype=torch.float64)
            want = direct(x, delta, a, b, c, d, s0)
            got, s_chunked = mamba2.ssd_chunked(x, delta, a, b, c, d, s0, chunk)
            self.assertLess((got - want).abs().max().item(), 1e-12, (t, chunk))
            s = s0
            for i in range(t):
                y, s = mamba2.ssd_step(x[i], delta[i], a, b[i], c[i], d, s)
                self.assertLess((y - want[i]).abs().max().item(), 1e-12)
            self.assertLess((s - s_chunked).abs().max().item(), 1e-12)

    def test_softplus_threshold(self):
        v = torch.tensor([-30.0, 0.0, 19.9, 20.0, 20.1, 50.0], dtype=torch.float64)
        got = mamba2.softplus(v)
        self.assertEqual(got[4].item(), 20.1)
        self.assertEqual(got[5].item(), 50.0)
        self.assertAlmostEqual(got[1].item(), float(torch.log(torch.tensor(2.0))))


class GoldenIsReproducibleTest(unittest.TestCase):
    def test_committed_files_are_what_the_script_writes(self):
        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory() as tmp:
            make_golden_mamba2.make(tmp)
            for name in ("config.json", "tokenizer.json", "model.safetensors"):
                with open(os.path.join(tmp, "mamba2", name), "rb") as f:
                    fresh = f.read()
                with open(os.path.join(GOLDEN, "mamba2", name), "rb") as f:
                    self.assertEqual(f.read(), fresh, name)
            with open(os.path.join(tmp, "mamba2_golden.json")) as f:
                fresh = json.load(f)
            with open(os.path.join(GOLDEN, "mamba2_golden.json")) as f:
                self.assertEqual(json.load(f), fresh)
            new, _ = read_safetensors(os.path.join(tmp, "mamba2_golden.safetensors"))
            old, _ = read_safetensors(os.path.join(GOLDEN, "mamba2_golden.safetensors"))
            self.assertEqual(sorted(new), sorted(old))
            for k in new:
                scale = max(old[k].abs().max().item(), 1e-6)
                self.assertLess((new[k] - old[k]).abs().max().item() / scale, 1e-6, k)


if __name__ == "__main__":
    unittest.main()
