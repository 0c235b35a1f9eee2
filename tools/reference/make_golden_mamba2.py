#!/usr/bin/python3
"""Writes a tiny random-weight Mamba-2 model and its float64 reference
outputs (tools/reference/mamba2.py).

    /usr/bin/python3 tools/reference/make_golden_mamba2.py [OUT_DIR]

OUT_DIR defaults to tests/data/golden. Writes mamba2/ (config.json,
model.safetensors in F16, tokenizer.json), mamba2_golden.safetensors (float32
arrays) and mamba2_golden.json (the cases), in the layout of make_golden.py.
Everything is a function of the fixed seeds below; the reference reads the
model back from the written directory, as the engine will.

Before writing, every case is checked against the reference's other forms:
chunked vs recurrent prefill (logits and states), segment by segment vs
whole (state passing, also across chunk edges), and steps vs a chunked
prefill of the continuation.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reference import mamba2  # noqa: E402
from reference.make_golden import (  # noqa: E402
    EOS, GREEDY, MIN_GREEDY_GAP, REPO, STEPS, VOCAB, close, compact_json,
    random_tokens, tokenizer_json, top_gap)
from reference.safetensors_io import write_safetensors  # noqa: E402

SEED = 3003  # weights; tokens use SEED + 1
NAME = "mamba2"


def model_config() -> dict:
    """D 32, 2 layers, E 64, H 4 heads of P 16, G 2 groups of N 8, K 4,
    chunk 8 (so a 40-token read crosses four chunk edges)."""
    return {
        "architecture": "mamba2",
        "d_model": 32,
        "d_intermediate": 0,
        "n_layer": 2,
        "vocab_size": VOCAB,
        "ssm_cfg": {"layer": "Mamba2", "d_state": 8, "d_conv": 4, "expand": 2,
                    "headdim": 16, "ngroups": 2, "chunk_size": 8},
        "attn_layer_idx": [],
        "attn_cfg": {},
        "rms_norm": True,
        "residual_in_fp32": True,
        "fused_add_norm": True,
        "pad_vocab_size_multiple": 16,  # 250 -> 256 rows
        "tie_embeddings": True,
        "eos_token_id": EOS,
    }


def weight_scale(name: str, shape) -> tuple[float, float]:
    """(mean, std). Decays exp(delta A) around 0.7-0.9 per token so state
    passing matters over tens of tokens; gates and norms O(1)."""
    fan_in = shape[-1]
    if name.endswith("norm.weight") or "norm_f" in name:
        return 1.0, 0.2
    if "embedding" in name:
        return 0.0, 1.0
    if name.endswith("conv1d.weight"):
        return 0.0, 0.5
    if name.endswith("conv1d.bias"):
        return 0.0, 0.1
    if name.endswith("dt_bias"):
        return -1.0, 0.5
    if name.endswith("A_log"):
        return -1.0, 0.5
    if name.endswith(".D"):
        return 1.0, 0.2
    if "out_proj" in name:
        return 0.0, 0.5 * fan_in**-0.5
    return 0.0, fan_in**-0.5


def random_weights(cfg: mamba2.Mamba2Config) -> Dict[str, torch.Tensor]:
    w = {}
    for name, shape in mamba2.expected_shapes(cfg).items():
        mean, std = weight_scale(name, shape)
        g = torch.Generator().manual_seed(SEED * 1_000_003 + zlib.crc32(name.encode()))
        t = mean + std * torch.randn(shape, generator=g, dtype=torch.float64)
        if name == "backbone.layers.1.mixer.dt_bias":
            # One head well above the softplus threshold (20): identity branch.
            t[3] = 22.0
        w[name] = t.to(torch.float16)
    return w


def close_states(a: mamba2.SequenceState, b: mamba2.SequenceState, what: str) -> None:
    assert a.token_count == b.token_count, what
    for i, (x, y) in enumerate(zip(a.layers, b.layers)):
        close(x.conv_tail, y.conv_tail, f"{what} layer {i} conv")
        close(x.ssm, y.ssm, f"{what} layer {i} ssm")


class CaseWriter:
    def __init__(self, model: mamba2.Mamba2Reference):
        self.model = model
        self.arrays: Dict[str, torch.Tensor] = {}
        self.cases: List[dict] = []

    def put(self, name: str, t: torch.Tensor) -> str:
        self.arrays[name] = t.to(torch.float32).contiguous()
        return name

    def self_check(self, name, tokens, cont, segments, logits, state) -> None:
        m = self.model
        rec = m.new_state()
        close(m.prefill_recurrent(tokens, rec), logits, name + " recurrent")
        close_states(rec, state, name + " recurrent")
        if segments:
            seg, begin = m.new_state(), 0
            for j, n in enumerate(segments):
                got = m.prefill(tokens[begin:begin + n], seg)
                begin += n
                close(got[-1], logits[begin - 1], f"{name} segment {j}")
            assert begin == len(tokens)
            close_states(seg, state, name + " segments")
        st = state.clone()
        steps = torch.stack([m.step(t, st) for t in cont])
        whole = state.clone()
        close(steps, m.prefill(cont, whole), name + " steps")

    def add(self, name: str, tokens: List[int], cont: List[int], all_logits: bool = False,
            segments: Optional[List[int]] = None) -> None:
        m = self.model
        state = m.new_state()
        logits = m.prefill(tokens, state)
        self.self_check(name, tokens, cont, segments, logits, state)
        case = dict(name=name, mode="causal", tokens=tokens)
        if segments:
            case["segments"] = segments
        case["last_logits"] = self.put(name + ".last_logits", logits[-1])
        if all_logits:
            case["all_logits"] = self.put(name + ".all_logits", logits)
        case["token_count"] = state.token_count
        case["states"] = [
            {"layer": i, "kind": "mamba2",
             "conv_tail": self.put(f"{name}.layer{i}.conv_tail", st.conv_tail),
             "ssm": self.put(f"{name}.layer{i}.ssm", st.ssm)}
            for i, st in enumerate(state.layers)]
        case["continuation"] = cont
        st = state.clone()
        case["step_logits"] = self.put(name + ".step_logits",
                                       torch.stack([m.step(t, st) for t in cont]))
        st = state.clone()
        greedy, gaps, cur = [], [], logits[-1]
        for i in range(GREEDY):
            gaps.append(top_gap(cur, m.vocab_size))
            greedy.append(m.argmax(cur))
            if i + 1 < GREEDY:
                cur = m.step(greedy[-1], st)
        if min(gaps) < MIN_GREEDY_GAP:
            raise AssertionError(f"{name}: greedy margin {min(gaps):.2g} is thin; change a seed")
        case["greedy"] = greedy
        case["greedy_min_margin"] = round(min(gaps), 6)
        self.cases.append(case)


def make(out_dir: str) -> dict:
    cfg_json = model_config()
    cfg = mamba2.parse_config(json.dumps(cfg_json))
    model_dir = os.path.join(out_dir, NAME)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        f.write(json.dumps(cfg_json, indent=2) + "\n")
    with open(os.path.join(model_dir, "tokenizer.json"), "w") as f:
        f.write(tokenizer_json())
    write_safetensors(os.path.join(model_dir, "model.safetensors"), random_weights(cfg),
                      {"format": "pt"})
    model = mamba2.Mamba2Reference.from_dir(model_dir)
    w = CaseWriter(model)
    g = torch.Generator().manual_seed(SEED + 1)
    # Segments end mid-chunk (5), on no chunk edge of the whole read (16 is
    # one: 2 chunks of 8), and carry a non-zero state into each later call.
    w.add("causal_40", random_tokens(40, g), random_tokens(STEPS, g), all_logits=True,
          segments=[5, 11, 24])
    w.add("causal_13", random_tokens(13, g), random_tokens(STEPS, g), segments=[9, 4])
    # Shorter than the conv kernel: zero rows in the conv window.
    w.add("causal_2", random_tokens(2, g), random_tokens(STEPS, g))
    manifest = {
        "generator": "tools/reference/make_golden_mamba2.py",
        "seed": SEED,
        "token_seed": SEED + 1,
        "model_dir": NAME,
        "arrays": f"{NAME}_golden.safetensors",
        "weights_dtype": "F16",
        "vocab_size": VOCAB,
        "padded_vocab_size": cfg.padded_vocab_size,
        "chunk_size": cfg.chunk_size,
        "greedy": "argmax over ids < vocab_size; the first of ties",
        "cases": w.cases,
    }
    write_safetensors(os.path.join(out_dir, f"{NAME}_golden.safetensors"), w.arrays,
                      {"generator": "tools/reference/make_golden_mamba2.py"})
    with open(os.path.join(out_dir, f"{NAME}_golden.json"), "w") as f:
        f.write(compact_json(manifest) + "\n")
    return manifest


def main(argv: List[str]) -> int:
    out_dir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(REPO, "tests/data/golden"))
    torch.set_num_threads(1)  # results independent of the machine's cores
    m = make(out_dir)
    margin = min(c["greedy_min_margin"] for c in m["cases"])
    print(f"{NAME}: {len(m['cases'])} cases, smallest greedy margin {margin:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
