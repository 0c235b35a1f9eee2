"""How int8 block rounding meets a model's weights, per model directory.

For every 2-D f32/f16/bf16 matrix whose rows split into blocks of 64 (the
engine's int8 layout, kernels/i8_layout.h: one f32 scale per block, the
block's largest |w| mapped to 127), prints the block maximum over the
block's RMS (median and 90th percentile; a Gaussian block of 64 gives
about 2.5) and the RMS rounding error of two alternatives relative to
the engine's: blocks of 32, and each block's largest weight kept exact
with the rest scaled by the second largest. models/README.md quotes it.

    /usr/bin/python3 tools/reference/int8_block_stats.py models/mamba2-qa ...
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from reference.safetensors_io import read_safetensors  # noqa: E402


def rounding_error_sq(blocks: torch.Tensor) -> float:
    """Sum of squared errors of symmetric int8 rounding, one scale a row."""
    scale = blocks.abs().amax(dim=1, keepdim=True) / 127.0
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return float(((torch.round(blocks / scale) * scale - blocks) ** 2).sum())


def matrices(model_dir: str):
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    for name, t in sorted(tensors.items()):
        if t.dim() == 2 and t.is_floating_point() and t.shape[1] % 64 == 0:
            yield name, t.to(torch.float64)


def block_stats(model_dir: str) -> Optional[Tuple[float, float, float, float]]:
    """(median and 90th percentile of block max / RMS, RMS error of blocks
    of 32 and of one kept outlier, each over the engine's) for the matrices
    of `model_dir`; None when none has rows of whole blocks of 64."""
    ratios, base, half, outlier = [], 0.0, 0.0, 0.0
    for _, w in matrices(model_dir):
        blocks = w.reshape(-1, 64)
        rms = blocks.pow(2).mean(dim=1).sqrt().clamp_min(1e-30)
        ratios.append(blocks.abs().amax(dim=1) / rms)
        base += rounding_error_sq(blocks)
        half += rounding_error_sq(w.reshape(-1, 32))
        rest = blocks.clone()
        rest[torch.arange(rest.shape[0]), rest.abs().argmax(dim=1)] = 0.0
        outlier += rounding_error_sq(rest)
    if not ratios:
        return None
    r = torch.cat(ratios)
    return (float(r.median()), float(r.quantile(0.9)), (half / base) ** 0.5,
            (outlier / base) ** 0.5)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(f"{'model':28} {'max/rms p50':>11} {'p90':>6} "
          f"{'blocks of 32':>12} {'outlier kept':>12}")
    for model_dir in argv[1:]:
        stats = block_stats(model_dir)
        if stats is None:
            print(f"{model_dir}: no matrix with rows of whole blocks of 64",
                  file=sys.stderr)
            return 1
        median, p90, half, outlier = stats
        print(f"{os.path.basename(model_dir.rstrip('/')):28} {median:11.2f} "
              f"{p90:6.2f} {half:12.3f} {outlier:12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
