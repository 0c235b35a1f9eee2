"""Float64 reference of a Llama-style Transformer (HF LlamaForCausalLM
names), written from the Llama papers' equations, in two forms: `prefill`
(all tokens of a read at once, causal mask) and `step` (one token against
the cache).

  h = E[tokens];  per layer:
    h += Attn(RMSNorm(h; input_layernorm))
    h += down(silu(gate(x)) * up(x)),  x = RMSNorm(h; post_attention_layernorm)
  logits = RMSNorm(h; model.norm) lm_head^T   (embed_tokens when tied)
  Attn: q = x Wq^T [T, H, hd], k, v = x Wk^T, x Wv^T [T, Hkv, hd];
        rotate-half RoPE (rope_theta) at absolute positions on q and k;
        head h reads kv head h // (H / Hkv); softmax(q k^T / sqrt(hd)) v,
        causal; o_proj.
The state per layer is the post-RoPE keys and the values of every token
read ([T, Hkv, hd] each).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import List

import torch

from reference.layers import rms_norm, rope, silu
from reference.safetensors_io import read_safetensors


@dataclasses.dataclass
class LlamaConfig:
    d: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    eps: float
    theta: float
    tied: bool


def parse(cfg: dict) -> LlamaConfig:
    heads = cfg["num_attention_heads"]
    return LlamaConfig(
        d=cfg["hidden_size"], layers=cfg["num_hidden_layers"], heads=heads,
        kv_heads=cfg.get("num_key_value_heads", heads),
        head_dim=cfg.get("head_dim", cfg["hidden_size"] // heads),
        inter=cfg["intermediate_size"], vocab=cfg["vocab_size"],
        eps=cfg.get("rms_norm_eps", 1e-6), theta=cfg.get("rope_theta", 10000.0),
        tied=cfg.get("tie_word_embeddings", False))


def shapes(c: LlamaConfig) -> dict:
    out = {"model.embed_tokens.weight": (c.vocab, c.d), "model.norm.weight": (c.d,)}
    if not c.tied:
        out["lm_head.weight"] = (c.vocab, c.d)
    for i in range(c.layers):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": (c.d,),
            p + "post_attention_layernorm.weight": (c.d,),
            p + "self_attn.q_proj.weight": (c.heads * c.head_dim, c.d),
            p + "self_attn.k_proj.weight": (c.kv_heads * c.head_dim, c.d),
            p + "self_attn.v_proj.weight": (c.kv_heads * c.head_dim, c.d),
            p + "self_attn.o_proj.weight": (c.d, c.heads * c.head_dim),
            p + "mlp.gate_proj.weight": (c.inter, c.d),
            p + "mlp.up_proj.weight": (c.inter, c.d),
            p + "mlp.down_proj.weight": (c.d, c.inter),
        })
    return out


@dataclasses.dataclass
class KvState:
    keys: torch.Tensor  # [T, Hkv, hd] post-RoPE
    values: torch.Tensor  # [T, Hkv, hd]


@dataclasses.dataclass
class LlamaState:
    layers: List[KvState]
    token_count: int = 0

    def clone(self) -> "LlamaState":
        return LlamaState([KvState(s.keys.clone(), s.values.clone()) for s in self.layers],
                          self.token_count)


class LlamaReference:
    def __init__(self, cfg: LlamaConfig, w: dict):
        self.cfg = cfg
        self.w = {k: v.to(torch.float64) for k, v in w.items()}
        self.vocab_size = cfg.vocab

    @staticmethod
    def from_dir(path: str) -> "LlamaReference":
        with open(os.path.join(path, "config.json")) as f:
            cfg = parse(json.load(f))
        w, _ = read_safetensors(os.path.join(path, "model.safetensors"))
        return LlamaReference(cfg, w)

    def new_state(self) -> LlamaState:
        c = self.cfg
        z = torch.zeros(0, c.kv_heads, c.head_dim, dtype=torch.float64)
        return LlamaState([KvState(z.clone(), z.clone()) for _ in range(c.layers)])

    def _attn(self, x, p, st: KvState, start: int, causal_block: bool):
        c, w = self.cfg, self.w
        t = x.shape[0]
        q = (x @ w[p + "q_proj.weight"].T).view(t, c.heads, c.head_dim)
        k = (x @ w[p + "k_proj.weight"].T).view(t, c.kv_heads, c.head_dim)
        v = (x @ w[p + "v_proj.weight"].T).view(t, c.kv_heads, c.head_dim)
        pos = torch.arange(start, start + t)
        q, k = rope(q, pos, c.theta), rope(k, pos, c.theta)
        st.keys = torch.cat([st.keys, k])
        st.values = torch.cat([st.values, v])
        g = c.heads // c.kv_heads
        kk = st.keys.repeat_interleave(g, dim=1)  # [P+T, H, hd]
        vv = st.values.repeat_interleave(g, dim=1)
        s = torch.einsum("thd,jhd->htj", q, kk) / c.head_dim**0.5
        if causal_block:
            ctx = kk.shape[0]
            mask = torch.arange(ctx)[None, :] > (start + torch.arange(t))[:, None]
            s = s.masked_fill(mask[None], float("-inf"))
        o = torch.einsum("htj,jhd->thd", torch.softmax(s, -1), vv).reshape(t, -1)
        return o @ w[p + "o_proj.weight"].T

    def _forward(self, tokens, state: LlamaState, causal_block: bool):
        c, w = self.cfg, self.w
        h = w["model.embed_tokens.weight"][torch.tensor(tokens)]
        start = state.token_count
        for i in range(c.layers):
            p = f"model.layers.{i}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], c.eps)
            h = h + self._attn(x, p + "self_attn.", state.layers[i], start, causal_block)
            x = rms_norm(h, w[p + "post_attention_layernorm.weight"], c.eps)
            a = silu(x @ w[p + "mlp.gate_proj.weight"].T) * (x @ w[p + "mlp.up_proj.weight"].T)
            h = h + a @ w[p + "mlp.down_proj.weight"].T
        state.token_count += len(tokens)
        head = w["model.embed_tokens.weight"] if c.tied else w["lm_head.weight"]
        return rms_norm(h, w["model.norm.weight"], c.eps) @ head.T

    def prefill(self, tokens: List[int], state: LlamaState) -> torch.Tensor:
        """Logits of every position [T, V] (parallel, causal mask)."""
        return self._forward(tokens, state, True)

    def step(self, token: int, state: LlamaState) -> torch.Tensor:
        """Logits [V] of one token; no mask (it sees the whole cache)."""
        return self._forward([token], state, False)[0]

    def state_tensors(self, state: LlamaState) -> List[torch.Tensor]:
        return [t for s in state.layers for t in (s.keys, s.values)]
