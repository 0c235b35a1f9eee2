"""The training configs of tools/train/train.py: the Based/JRT sliding-window
size is a knob (--window-size), written where the engine reads it
(alt_mixer_2.window_size) and used by the training form as the engine uses
it (window_size / 2 tokens kept).

Exits 77 (ctest: skipped) when Debian's python3-torch is not installed
(scripts/setup.sh --tools)."""

import os
import sys
import unittest

try:
    import torch
except ImportError:
    print("skipped: python3-torch is not installed (scripts/setup.sh --tools)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import task  # noqa: E402
from train import build_model, make_config  # noqa: E402


class WindowSizeTest(unittest.TestCase):
    def config(self, arch, **kwargs):
        vocab = task.token_ids()
        return make_config(arch, len(vocab), 128, vocab["[PAD]"], feature_dim=4, **kwargs)

    def test_default_window_is_64(self):
        for arch in ("based", "jrt"):
            cfg = self.config(arch)
            self.assertEqual(cfg["alt_mixer_2"]["window_size"], 64)
            self.assertEqual(build_model(arch, cfg, 0).window, 32)

    def test_window_size_reaches_config_and_model(self):
        for arch in ("based", "jrt"):
            cfg = self.config(arch, window_size=16)
            self.assertEqual(cfg["alt_mixer_2"]["window_size"], 16)
            model = build_model(arch, cfg, 0)
            self.assertEqual(model.window, 8)
            # A document longer than the window runs and gives finite
            # logits for every position.
            ids = torch.randint(4, len(task.token_ids()), (2, 40))
            logits, _ = model(ids)
            self.assertEqual(tuple(logits.shape[:2]), (2, 40))
            self.assertTrue(torch.isfinite(logits).all())


if __name__ == "__main__":
    torch.manual_seed(0)
    unittest.main()
