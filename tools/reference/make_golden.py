#!/usr/bin/python3
"""Writes tiny random-weight models and their float64 reference outputs.

    /usr/bin/python3 tools/reference/make_golden.py [OUT_DIR]

OUT_DIR defaults to tests/data/golden. For each of `based` and `jrt` it
writes a model directory <name>/ (config.json, model.safetensors,
tokenizer.json), <name>_golden.safetensors (float32 arrays) and
<name>_golden.json (the cases: tokens, modes, array names, greedy tokens).
Everything is a function of the fixed seeds below; the reference reads the
model back from the written directory, exactly as the engine will.

Before writing, every case is checked against the reference's other forms
(parallel vs recurrent prefill, segment by segment vs whole, JRT prefix of
the first M tokens then causal vs prefix of all), so golden data never comes
from an inconsistent reference.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from typing import Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reference import layers  # noqa: E402
from reference.config import expected_shapes, parse_config  # noqa: E402
from reference.model import ReferenceModel, SequenceState, prefix_inputs  # noqa: E402
from reference.safetensors_io import write_safetensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = 250  # WordLevel "[UNK]" 0, "w1" .. "w248", "<|endoftext|>" 249
EOS = VOCAB - 1
SEEDS = {"based": 1001, "jrt": 2002}  # weights; tokens use seed + 1
D = 16
ENC_LENGTH = 16
STEPS = 6  # teacher-forced continuation tokens per case
GREEDY = 8  # greedy tokens per case
MIN_GREEDY_GAP = 1e-3  # smallest top-1 / top-2 logit margin a case may have


def tokenizer_json() -> str:
    vocab = {"[UNK]": 0}
    vocab.update({f"w{i}": i for i in range(1, VOCAB - 1)})
    vocab["<|endoftext|>"] = EOS
    tok = {
        "version": "1.0",
        "added_tokens": [{"id": EOS, "content": "<|endoftext|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "decoder": None,
        "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": vocab},
    }
    return json.dumps(tok, indent=1) + "\n"


def model_config(arch: str) -> dict:
    """d 16, 4 layers: conv, (prefix) linear attention, sliding window, and
    conv (Based) or a second prefix linear attention (JRT)."""
    c = {
        "architecture": arch,
        "model_type": arch,
        "n_embd": D,
        "n_layer": 4,
        "n_head": 2,  # sliding window: hd 8
        "n_inner": 32,  # MLP width rounds up to 256
        "vocab_size": VOCAB,
        "pad_vocab_size_multiple": 8,  # 250 -> 256 rows
        "layer_norm_epsilon": 1e-5,
        "rotary_emb_base": 10000.0,
        "activation_function": "swiglu",
        "rms_norm": True,
        "residual_in_fp32": True,
        "tie_word_embeddings": True,
        "eos_token_id": EOS,
        "bos_token_id": EOS,
        "mixer": {"expand_proj": 4, "kernel_sizes": 3, "use_bias": True},
        # 4 heads (hd 4), unlike the window's 2; F 16 -> 273 features.
        "alt_mixer": {"feature_dim": 16, "num_heads": 4},
        "alt_mixer_2": {"window_size": 8},  # 4 previous keys + self
        "alt_mixer_layers": [1],
        "alt_mixer_2_layers": [2],
    }
    if arch == "jrt":
        # Where upstream has it: a PrefixLinearAttention constructor argument.
        c["alt_mixer"]["enc_length"] = ENC_LENGTH
        c["alt_mixer_layers"] = [1, 3]
    return c


def weight_scale(name: str, shape) -> tuple[float, float]:
    """(mean, std) of a tensor. Scales keep activations O(1) and make
    attention sharp (q.k / 4 and window scores of order 1-3), so mask,
    window and feature-map mistakes move the logits visibly."""
    fan_in = shape[-1]
    if name.endswith("norm1.weight") or name.endswith("norm2.weight") or "ln_f" in name:
        return 1.0, 0.2
    if "word_embeddings" in name:
        return 0.0, 1.0
    if name.endswith(".bias"):
        return 0.0, 0.1
    if "conv.conv" in name:
        return 0.0, 0.5
    if "fc2" in name or "out_proj" in name:  # back into the residual stream
        return 0.0, 0.5 * fan_in**-0.5
    if "Wqkv" in name:
        return 0.0, 1.5 * fan_in**-0.5
    return 0.0, fan_in**-0.5


def random_weights(cfg_json: dict, seed: int, dtype: torch.dtype) -> Dict[str, torch.Tensor]:
    """Every tensor the config needs, by upstream name; each tensor's values
    depend only on the seed and its name."""
    w: Dict[str, torch.Tensor] = {}
    for name, shape in expected_shapes(parse_config(json.dumps(cfg_json))).items():
        mean, std = weight_scale(name, shape)
        g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        t = mean + std * torch.randn(shape, generator=g, dtype=torch.float64)
        w[name] = t.to(dtype)
    return w


def write_model(path: str, cfg_json: dict, weights: Dict[str, torch.Tensor]) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write(json.dumps(cfg_json, indent=2) + "\n")
    with open(os.path.join(path, "tokenizer.json"), "w") as f:
        f.write(tokenizer_json())
    write_safetensors(os.path.join(path, "model.safetensors"), weights, {"format": "pt"})


def compact_json(obj) -> str:
    """Indented JSON with every list of numbers or booleans on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(
        r"\[\s*((?:-?[\d.e+-]+|true|false)(?:,\s*(?:-?[\d.e+-]+|true|false))*)\s*\]",
        lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
        text,
    )


def random_tokens(n: int, g: torch.Generator) -> List[int]:
    """Ids in [1, EOS): neither the unknown token nor end of sequence."""
    return torch.randint(1, EOS, (n,), generator=g).tolist()


def close(a: torch.Tensor, b: torch.Tensor, what: str, tol: float = 1e-9) -> None:
    err = (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)
    if err > tol:
        raise AssertionError(f"reference disagrees with itself: {what}: {err:.3g}")


def state_tensors(state: SequenceState) -> List[torch.Tensor]:
    out = []
    for st in state.layers:
        if isinstance(st, layers.ConvState):
            out.append(st.tail)
        elif isinstance(st, layers.WindowState):
            out += [st.keys, st.values]
        else:
            out += [st.s, st.z]
    return out


def close_states(a: SequenceState, b: SequenceState, what: str) -> None:
    assert a.token_count == b.token_count, what
    for i, (x, y) in enumerate(zip(state_tensors(a), state_tensors(b))):
        close(x, y, f"{what} state tensor {i}")


def top_gap(logits: torch.Tensor, vocab: int) -> float:
    top = torch.topk(logits[:vocab], 2).values
    return float(top[0] - top[1])


class CaseWriter:
    """Collects float32 arrays and the JSON description of each case."""

    def __init__(self, model: ReferenceModel):
        self.model = model
        self.arrays: Dict[str, torch.Tensor] = {}
        self.cases: List[dict] = []

    def put(self, name: str, t: torch.Tensor) -> str:
        self.arrays[name] = t.to(torch.float32).contiguous()
        return name

    def states(self, case: str, state: SequenceState, big: bool) -> List[dict]:
        """Per-layer states; linear-attention S / z only when `big`."""
        out = []
        for i, st in enumerate(state.layers):
            p = f"{case}.layer{i}"
            if isinstance(st, layers.ConvState):
                out.append({"layer": i, "kind": "short_conv",
                            "tail": self.put(p + ".tail", st.tail)})
            elif isinstance(st, layers.WindowState):
                out.append({"layer": i, "kind": "sliding_window", "count": st.count,
                            "keys": self.put(p + ".keys", st.keys),
                            "values": self.put(p + ".values", st.values)})
            elif big:
                out.append({"layer": i, "kind": "linear_attention",
                            "kv": self.put(p + ".kv", st.s),
                            "k_sum": self.put(p + ".k_sum", st.z)})
        return out

    def self_check(self, name, tokens, mode, keep, cont, segments, logits, state) -> None:
        """The reference's other forms must agree with its parallel prefill:
        the recurrent form, the segments (a prefix read's first segment in
        its mode, the rest causal), and steps vs a parallel prefill of all."""
        m = self.model
        rec = m.new_state()
        close(m.prefill_recurrent(tokens, rec, mode, keep), logits, name + " recurrent")
        close_states(rec, state, name + " recurrent")
        if segments:
            seg, begin = m.new_state(), 0
            for j, n in enumerate(segments):
                part = tokens[begin:begin + n]
                if j == 0:
                    got = m.prefill(part, seg, mode, keep[:n] if keep else None)
                else:
                    got = m.prefill(part, seg, "causal")
                begin += n
                close(got[-1], logits[begin - 1], f"{name} segment {j}")
            assert begin == len(tokens)
            close_states(seg, state, name + " segments")
        st, steps = state.clone(), []
        for t in cont:
            steps.append(m.step(t, st))
        whole = m.new_state()
        m.prefill(tokens, whole, mode, keep)
        close(torch.stack(steps), m.prefill(cont, whole, "causal"), name + " steps")

    def add(self, name: str, tokens: List[int], mode: str, keep: Optional[List[bool]],
            cont: List[int], extra: dict, all_logits: bool = False,
            big_states: bool = True, segments: Optional[List[int]] = None) -> None:
        """Reads `tokens` (mode, keep as ReferenceModel.prefill), then records
        its logits, states, teacher-forced steps over `cont` and greedy."""
        m = self.model
        state = m.new_state()
        logits = m.prefill(tokens, state, mode, keep)
        self.self_check(name, tokens, mode, keep, cont, segments, logits, state)
        case = dict(name=name, mode=mode, **extra, tokens=tokens,
                    pad_count=0 if keep is None else keep.count(False))
        if segments:
            case["segments"] = segments
        case["last_logits"] = self.put(name + ".last_logits", logits[-1])
        if all_logits:
            case["all_logits"] = self.put(name + ".all_logits", logits)
        case["token_count"] = state.token_count
        case["states"] = self.states(name, state, big_states)
        st = state.clone()
        case["continuation"] = cont
        steps = torch.stack([m.step(t, st) for t in cont])
        case["step_logits"] = self.put(name + ".step_logits", steps)
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


def based_cases(w: CaseWriter, g: torch.Generator) -> None:
    tokens = random_tokens(32, g)
    w.add("causal_32", tokens, "causal", None, random_tokens(STEPS, g), {},
          all_logits=True, segments=[13, 7, 12])
    # Shorter than the conv kernel and the window: zero history rows.
    w.add("causal_2", random_tokens(2, g), "causal", None, random_tokens(STEPS, g), {})


def jrt_cases(w: CaseWriter, g: torch.Generator) -> None:
    def prefix_case(name, n, pad=True, read_twice=False, big=False, segments=None):
        doc = random_tokens(n, g)
        tokens, keep = prefix_inputs(doc, ENC_LENGTH, pad, read_twice, w.model.cfg.pad_token_id)
        extra = dict(document=doc, pad=pad, read_twice=read_twice)
        w.add(name, tokens, "prefix", keep, random_tokens(STEPS, g), extra,
              big_states=big, segments=segments)

    prefix_case("prefix_pad_7", 7, big=True)  # N < M: 9 masked pads
    prefix_case("prefix_equal_16", 16)  # N = M
    prefix_case("prefix_long_27", 27, big=True, segments=[ENC_LENGTH, 11])  # N > M
    prefix_case("read2x_pad_6", 6, read_twice=True)  # 12 tokens + 4 pads
    prefix_case("read2x_long_11", 11, read_twice=True)  # 22 tokens, no pads
    prefix_case("prefix_nopad_7", 7, pad=False)  # encoder over all 7 tokens
    w.add("causal_20", random_tokens(20, g), "causal", None, random_tokens(STEPS, g), {},
          big_states=False)


def make(arch: str, out_dir: str) -> dict:
    seed = SEEDS[arch]
    cfg_json = model_config(arch)
    dtype = torch.float16 if arch == "based" else torch.bfloat16
    model_dir = os.path.join(out_dir, arch)
    write_model(model_dir, cfg_json, random_weights(cfg_json, seed, dtype))
    model = ReferenceModel.from_dir(model_dir)
    writer = CaseWriter(model)
    g = torch.Generator().manual_seed(seed + 1)
    (based_cases if arch == "based" else jrt_cases)(writer, g)
    manifest = {
        "generator": "tools/reference/make_golden.py",
        "seed": seed,
        "token_seed": seed + 1,
        # Paths relative to this manifest's directory.
        "model_dir": arch,
        "arrays": f"{arch}_golden.safetensors",
        "weights_dtype": "F16" if arch == "based" else "BF16",
        "vocab_size": VOCAB,
        "padded_vocab_size": model.cfg.padded_vocab_size,
        "enc_length": model.cfg.enc_length,
        "pad_token_id": model.cfg.pad_token_id,
        "greedy": "argmax over ids < vocab_size; the first of ties",
        "cases": writer.cases,
    }
    write_safetensors(os.path.join(out_dir, f"{arch}_golden.safetensors"), writer.arrays,
                      {"generator": "tools/reference/make_golden.py"})
    with open(os.path.join(out_dir, f"{arch}_golden.json"), "w") as f:
        f.write(compact_json(manifest) + "\n")
    return manifest


def main(argv: List[str]) -> int:
    out_dir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(REPO, "tests/data/golden"))
    torch.set_num_threads(1)  # results independent of the machine's cores
    for arch in ("based", "jrt"):
        m = make(arch, out_dir)
        margin = min(c["greedy_min_margin"] for c in m["cases"])
        print(f"{arch}: {len(m['cases'])} cases, smallest greedy margin {margin:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
