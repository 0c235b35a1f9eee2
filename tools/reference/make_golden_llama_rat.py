#!/usr/bin/python3
"""Writes tiny random-weight Llama, RAT, Nemotron-H and Granite-4.0-H models
(dense, and `granite_moe` with experts) and the float64 reference outputs
(tools/reference/llama.py, rat.py, nemotron_h.py, granite_hybrid.py) on them.

    /usr/bin/python3 tools/reference/make_golden_llama_rat.py [OUT_DIR [ARCH ...]]

OUT_DIR defaults to tests/data/golden. Same format as make_golden.py: per
model a directory <name>/ (config.json, model.safetensors F16,
tokenizer.json), <name>_golden.safetensors (float32 arrays) and
<name>_golden.json (cases). Before writing, every case is checked against
the reference's other form (prefill vs token-by-token steps, segments vs
whole), so golden data never comes from an inconsistent reference.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Dict, List

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reference import granite_hybrid, llama, nemotron_h, rat  # noqa: E402
from reference.make_golden import (EOS, GREEDY, MIN_GREEDY_GAP, STEPS, VOCAB,  # noqa: E402
                                   close, compact_json, random_tokens, tokenizer_json,
                                   top_gap)
from reference.safetensors_io import write_safetensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Weights; tokens use seed + 1.
SEEDS = {"llama": 5005, "rat": 6006, "nemotron_h": 7009, "granite_hybrid": 8008,
         "granite_moe": 9009}
MODULES = {"llama": llama, "rat": rat, "nemotron_h": nemotron_h,
           "granite_hybrid": granite_hybrid, "granite_moe": granite_hybrid}
# The smallest gap allowed between the k-th and the (k+1)-th router logit of
# any token (granite_moe): float32 must pick the same experts as float64.
MIN_ROUTER_GAP = 1e-3
CHUNK = 4  # RAT L: the 32-token case spans 8 chunks
WINDOW = 3  # RAT-SWA: 3 previous keys + self


def model_config(arch: str) -> dict:
    if arch == "llama":
        # d 16, 2 layers, 4 query heads over 2 KV heads (hd 4), untied head.
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "intermediate_size": 32, "vocab_size": VOCAB,
                "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
                "max_position_embeddings": 2048, "eos_token_id": EOS, "bos_token_id": EOS}
    if arch == "nemotron_h":
        # d 16, 4 layers: Mamba-2, attention, Mamba-2, MLP. Mamba: 4 heads of
        # P 4 (d_inner 16 = H·P, not expand·d) over 2 B/C groups (so the
        # head -> group map and the per-group gated norm matter), N 8, K 4,
        # SSD chunk 4 (32 tokens span 8 chunks). Attention: 4 heads over 2
        # KV heads (hd 4), no positional encoding. Untied head. Python's json
        # writes time_step_limit's Infinity, as the published configs have it.
        return {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
                "hidden_size": 16, "hybrid_override_pattern": "M*M-",
                "num_hidden_layers": 4, "mamba_num_heads": 4, "mamba_head_dim": 4,
                "n_groups": 2, "ssm_state_size": 8, "conv_kernel": 4, "chunk_size": CHUNK,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
                "intermediate_size": 32, "mlp_hidden_act": "relu2",
                "mamba_hidden_act": "silu", "layer_norm_epsilon": 1e-5,
                "use_bias": False, "use_conv_bias": True,
                "time_step_limit": [0.0, float("inf")], "vocab_size": VOCAB,
                "tie_word_embeddings": False, "max_position_embeddings": 4096,
                "eos_token_id": EOS, "bos_token_id": EOS}
    if arch == "granite_moe":
        # The dense model's shape with 4 experts of width 8, 2 per token, next
        # to the shared MLP (now 16).
        cfg = model_config("granite_hybrid")
        cfg.update({"num_local_experts": 4, "num_experts_per_tok": 2,
                    "intermediate_size": 8, "shared_intermediate_size": 16})
        return cfg
    if arch == "granite_hybrid":
        # d 16, 3 layers: mamba, attention, mamba, each with the shared SwiGLU
        # MLP (32). Mamba: 4 heads of P 8 (d_inner 32 = expand 2 * d) over 2
        # groups, N 8, K 4, chunk 4. Attention: 4 heads over 2 KV heads
        # (hd 4), no positional encoding, softmax scale 0.3 (attention_
        # multiplier, not 1/sqrt(4)). Multipliers away from 1 so that a
        # forgotten one moves the logits; tied head.
        return {"architectures": ["GraniteMoeHybridForCausalLM"],
                "model_type": "granitemoehybrid", "hidden_size": 16,
                "num_hidden_layers": 3, "layer_types": ["mamba", "attention", "mamba"],
                "mamba_n_heads": 4, "mamba_d_head": 8, "mamba_n_groups": 2,
                "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2,
                "mamba_chunk_size": CHUNK, "num_attention_heads": 4,
                "num_key_value_heads": 2, "shared_intermediate_size": 32,
                "num_local_experts": 0, "position_embedding_type": "nope",
                "hidden_act": "silu", "rms_norm_eps": 1e-5,
                "embedding_multiplier": 2.0, "residual_multiplier": 0.5,
                "attention_multiplier": 0.3, "logits_scaling": 1.5,
                "vocab_size": VOCAB, "tie_word_embeddings": True,
                "max_position_embeddings": 4096, "eos_token_id": EOS,
                "bos_token_id": EOS}
    # d 16, 3 layers: RAT, SWA, RAT (interleave_step 2); 4 heads (hd 4) over
    # 2 q/k groups, so the tiling matters.
    return {"architecture": "rat", "model_type": "rat", "d_model": 16, "num_layers": 3,
            "num_heads": 4, "ngroups": 2, "chunk_size": CHUNK, "ffn_hidden": 32,
            "vocab_size": VOCAB, "norm_eps": 1e-6, "rope_base": 10000.0,
            "interleave_step": 2, "window": WINDOW, "tie_embedding": True,
            "eos_token_id": EOS, "training_context": 4096}


def weight_scale(name: str, shape) -> tuple:
    """(mean, std): activations O(1), attention sharp enough that mask and
    chunk mistakes move the logits visibly."""
    fan_in = shape[-1]
    if name.endswith("norm.weight") or "layernorm" in name or name.endswith("ln.weight"):
        return 1.0, 0.2
    if "embed" in name or "wte" in name:
        return 0.0, 1.0
    if "router" in name:
        return 0.0, 2.0 * fan_in**-0.5  # decisive routing: wide logit gaps
    if name.endswith("gate_bias"):
        return 0.5, 1.0  # forget gates from ~0.3 to ~0.9
    if "o_proj" in name or "down_proj" in name or "out_proj" in name or "fc2" in name:
        return 0.0, 0.5 * fan_in**-0.5
    if "q_proj" in name or "k_proj" in name or "in_proj" in name:
        return 0.0, 1.5 * fan_in**-0.5
    return 0.0, fan_in**-0.5


def close_states(a: List[torch.Tensor], b: List[torch.Tensor], what: str) -> None:
    for x, y in zip(a, b):
        assert x.shape == y.shape, what
        if x.numel():
            close(x, y, what)


def random_weights(shapes: Dict[str, tuple], seed: int) -> Dict[str, torch.Tensor]:
    w = {}
    for name, shape in shapes.items():
        mean, std = weight_scale(name, shape)
        g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        w[name] = (mean + std * torch.randn(shape, generator=g, dtype=torch.float64)).to(
            torch.float16)
    return w


class Writer:
    def __init__(self, arch: str, model):
        self.arch, self.model = arch, model
        self.arrays: Dict[str, torch.Tensor] = {}
        self.cases: List[dict] = []

    def put(self, name: str, t: torch.Tensor) -> str:
        self.arrays[name] = t.to(torch.float32).contiguous()
        return name

    def states(self, case: str, state) -> List[dict]:
        out = []
        for i, st in enumerate(state.layers):
            p = f"{case}.layer{i}"
            if st is None:
                out.append({"layer": i, "kind": "stateless"})
            elif isinstance(st, nemotron_h.MambaState):  # Granite's too
                out.append({"layer": i, "kind": "mamba2", "count": state.token_count,
                            "conv_tail": self.put(p + ".conv_tail", st.conv_tail),
                            "ssm": self.put(p + ".ssm", st.ssm)})
            elif isinstance(st, (llama.KvState, nemotron_h.KvState)):
                out.append({"layer": i, "kind": "full_kv", "count": state.token_count,
                            "keys": self.put(p + ".keys", st.keys),
                            "values": self.put(p + ".values", st.values)})
            elif isinstance(st, rat.SwaState):
                n = min(st.count, WINDOW)
                out.append({"layer": i, "kind": "sliding_window", "count": st.count,
                            "keys": self.put(p + ".keys", st.keys[st.count - n:]),
                            "values": self.put(p + ".values", st.values[st.count - n:])})
            else:
                out.append({"layer": i, "kind": "rat_chunk_kv", "count": st.count,
                            "closed": self.put(p + ".closed", st.closed),
                            "open": self.put(p + ".open", st.open)})
        return out

    def add(self, name, tokens, cont, all_logits=False, segments=None):
        m = self.model
        state = m.new_state()
        logits = m.prefill(tokens, state)
        # The decode form from an empty state must agree at every position.
        rec = m.new_state()
        close(torch.stack([m.step(t, rec) for t in tokens]), logits, name + " steps")
        close_states(m.state_tensors(rec), m.state_tensors(state), name + " step state")
        case = {"name": name, "mode": "causal", "tokens": tokens}
        if segments:
            seg, begin = m.new_state(), 0
            for j, n in enumerate(segments):
                got = m.prefill(tokens[begin:begin + n], seg)
                begin += n
                close(got[-1], logits[begin - 1], f"{name} segment {j}")
            assert begin == len(tokens)
            close_states(m.state_tensors(seg), m.state_tensors(state), name + " segment state")
            case["segments"] = segments
        case["last_logits"] = self.put(name + ".last_logits", logits[-1])
        if all_logits:
            case["all_logits"] = self.put(name + ".all_logits", logits)
        case["token_count"] = state.token_count
        case["states"] = self.states(name, state)
        st = state.clone()
        steps = torch.stack([m.step(t, st) for t in cont])
        whole = m.new_state()
        close(m.prefill(tokens + cont, whole)[len(tokens):], steps, name + " continuation")
        case["continuation"] = cont
        case["step_logits"] = self.put(name + ".step_logits", steps)
        st = state.clone()
        greedy, gaps, cur = [], [], logits[-1]
        for i in range(GREEDY):
            gaps.append(top_gap(cur, m.vocab_size))
            greedy.append(int(torch.argmax(cur[:m.vocab_size])))
            if i + 1 < GREEDY:
                cur = m.step(greedy[-1], st)
        if min(gaps) < MIN_GREEDY_GAP:
            raise AssertionError(f"{name}: greedy margin {min(gaps):.2g} is thin; change a seed")
        case["greedy"] = greedy
        case["greedy_min_margin"] = round(min(gaps), 6)
        self.cases.append(case)


def make(arch: str, out_dir: str) -> dict:
    seed = SEEDS[arch]
    cfg_json = model_config(arch)
    mod = MODULES[arch]
    shapes = mod.shapes(mod.parse(cfg_json))
    model_dir = os.path.join(out_dir, arch)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        f.write(json.dumps(cfg_json, indent=2) + "\n")
    with open(os.path.join(model_dir, "tokenizer.json"), "w") as f:
        f.write(tokenizer_json())
    write_safetensors(os.path.join(model_dir, "model.safetensors"),
                      random_weights(shapes, seed), {"format": "pt"})
    reference = {"llama": llama.LlamaReference, "rat": rat.RatReference,
                 "nemotron_h": nemotron_h.NemotronHReference,
                 "granite_hybrid": granite_hybrid.GraniteHybridReference,
                 "granite_moe": granite_hybrid.GraniteHybridReference}[arch]
    model = reference.from_dir(model_dir)
    w = Writer(arch, model)
    g = torch.Generator().manual_seed(seed + 1)
    if arch == "llama":
        w.add("causal_32", random_tokens(32, g), random_tokens(STEPS, g), True, [13, 7, 12])
        w.add("causal_2", random_tokens(2, g), random_tokens(STEPS, g))
    elif arch in ("nemotron_h", "granite_hybrid", "granite_moe"):
        # Segments end mid-chunk, on a chunk edge and mid-chunk again.
        w.add("causal_32", random_tokens(32, g), random_tokens(STEPS, g), True, [5, 7, 3, 17])
        w.add("causal_3", random_tokens(3, g), random_tokens(STEPS, g))  # < the conv window
    else:
        # Segments end mid-chunk, on a chunk edge and mid-chunk again.
        w.add("causal_32", random_tokens(32, g), random_tokens(STEPS, g), True, [5, 7, 3, 17])
        w.add("causal_3", random_tokens(3, g), random_tokens(STEPS, g))  # inside chunk 0
        w.add("causal_8", random_tokens(8, g), random_tokens(STEPS, g))  # two whole chunks
    gap = getattr(model, "min_router_gap", float("inf"))
    if gap < MIN_ROUTER_GAP:
        raise AssertionError(f"{arch}: router gap {gap:.2g} is thin; change a seed")
    manifest = {"generator": "tools/reference/make_golden_llama_rat.py", "seed": seed,
                "token_seed": seed + 1, "model_dir": arch,
                "arrays": f"{arch}_golden.safetensors", "weights_dtype": "F16",
                "vocab_size": VOCAB, "padded_vocab_size": VOCAB,
                "greedy": "argmax over ids < vocab_size; the first of ties",
                "cases": w.cases}
    write_safetensors(os.path.join(out_dir, f"{arch}_golden.safetensors"), w.arrays,
                      {"generator": "tools/reference/make_golden_llama_rat.py"})
    with open(os.path.join(out_dir, f"{arch}_golden.json"), "w") as f:
        f.write(compact_json(manifest) + "\n")
    return manifest


def main(argv: List[str]) -> int:
    out_dir = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(REPO, "tests/data/golden"))
    torch.set_num_threads(1)
    for arch in argv[2:] or ("llama", "rat", "nemotron_h", "granite_hybrid", "granite_moe"):
        m = make(arch, out_dir)
        margin = min(c["greedy_min_margin"] for c in m["cases"])
        print(f"{arch}: {len(m['cases'])} cases, smallest greedy margin {margin:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
