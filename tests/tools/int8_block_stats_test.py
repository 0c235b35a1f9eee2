#!/usr/bin/python3
"""Tests tools/reference/int8_block_stats.py on weights whose statistics are
known: Gaussian blocks (block max over RMS about 2.4, small gains from
either alternative), blocks of one large weight among small ones (keeping
it exact removes most of the error), and a model with no matrix of whole
blocks of 64 (an error, not a row of zeros).

Exits 77 (ctest: skipped) when Debian's python3-torch is not installed
(scripts/setup.sh --tools installs it).
"""

from __future__ import annotations

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

from reference.int8_block_stats import block_stats, main  # noqa: E402
from reference.safetensors_io import write_safetensors  # noqa: E402


class Int8BlockStatsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, tensors):
        write_safetensors(os.path.join(self.dir, "model.safetensors"), tensors)

    def test_gaussian_blocks(self):
        g = torch.Generator().manual_seed(5)
        self.write({"a.weight": torch.randn(256, 128, generator=g),
                    "norm.weight": torch.ones(128)})
        median, p90, half, outlier = block_stats(self.dir)
        self.assertGreater(median, 2.1)
        self.assertLess(median, 2.8)
        self.assertGreater(p90, median)
        # Neither alternative halves a Gaussian block's rounding error.
        self.assertGreater(half, 0.7)
        self.assertLess(half, 1.0)
        self.assertGreater(outlier, 0.7)
        self.assertLess(outlier, 1.0)

    def test_one_outlier_per_block(self):
        g = torch.Generator().manual_seed(6)
        w = 0.01 * torch.randn(64, 256, generator=g)
        w[:, ::64] = 1.0  # the first weight of every block of 64
        self.write({"b.weight": w})
        median, _, half, outlier = block_stats(self.dir)
        self.assertGreater(median, 7.0)
        self.assertLess(outlier, 0.1)
        # Blocks of 32: half of them no longer hold the outlier.
        self.assertLess(half, 0.8)

    def test_no_whole_blocks_is_an_error(self):
        self.write({"c.weight": torch.randn(8, 100)})
        self.assertIsNone(block_stats(self.dir))
        self.assertEqual(main(["int8_block_stats.py", self.dir]), 1)


if __name__ == "__main__":
    unittest.main()
