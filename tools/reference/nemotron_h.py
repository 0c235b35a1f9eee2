"""Float64 reference of an NVIDIA Nemotron-H hybrid (transformers
`NemotronHForCausalLM`, model_type "nemotron_h"), written from the
hybrid-model fact sheet's equations (§1 and §2), in two forms: `prefill`
(every layer over all tokens of a read: chunked SSD, masked attention) and
`step` (one token: the SSM recurrence, attention over the cache).

  h = E[tokens]                      (backbone.embeddings, unscaled)
  per layer i, kind = hybrid_override_pattern[i]:
    h += Mixer_i(RMSNorm(h; backbone.layers.i.norm))
      M: Mamba-2 with G groups, d_inner = mamba_num_heads * mamba_head_dim,
         head h reads B/C group h // (H / G); gated RMSNorm per group of
         d_inner / G with layer_norm_epsilon (gate before norm)
      *: causal GQA attention, NO positional encoding, scale hd^-1/2
      -: down(relu(up(x))^2)
  logits = RMSNorm(h; backbone.norm_f) lm_head^T   (embeddings when tied)
State per layer: M conv tail [K-1, conv_dim] + SSM [H, P, N]; * keys and
values of every token [T, Hkv, hd]; - nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F

from reference.layers import rms_norm
from reference.mamba2 import softplus, ssd_chunked, ssd_step
from reference.safetensors_io import read_safetensors


@dataclasses.dataclass
class NemotronHConfig:
    d: int
    pattern: str
    heads: int  # Mamba heads H
    head_dim: int  # P
    groups: int
    d_state: int
    d_conv: int
    chunk: int
    attn_heads: int
    kv_heads: int
    attn_head_dim: int
    inter: int
    eps: float
    vocab: int
    tied: bool

    @property
    def d_inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.groups * self.d_state

    @property
    def d_in_proj(self) -> int:
        return self.d_inner + self.conv_dim + self.heads


def parse(cfg: dict) -> NemotronHConfig:
    heads = cfg.get("num_attention_heads", 1)
    return NemotronHConfig(
        d=cfg["hidden_size"], pattern=cfg["hybrid_override_pattern"],
        heads=cfg["mamba_num_heads"], head_dim=cfg["mamba_head_dim"],
        groups=cfg.get("n_groups", cfg.get("mamba_n_groups", 8)),
        d_state=cfg.get("ssm_state_size", 128),
        d_conv=cfg.get("conv_kernel", cfg.get("mamba_d_conv", 4)),
        chunk=cfg.get("chunk_size", cfg.get("mamba_chunk_size", 128)),
        attn_heads=heads, kv_heads=cfg.get("num_key_value_heads", heads),
        attn_head_dim=cfg.get("head_dim", cfg.get("attention_head_dim",
                                                  cfg["hidden_size"] // heads)),
        inter=cfg.get("intermediate_size", 0), eps=cfg.get("layer_norm_epsilon", 1e-5),
        vocab=cfg["vocab_size"], tied=cfg.get("tie_word_embeddings", False))


def shapes(c: NemotronHConfig) -> dict:
    """Every tensor by its published name, with its shape."""
    out = {"backbone.embeddings.weight": (c.vocab, c.d), "backbone.norm_f.weight": (c.d,)}
    if not c.tied:
        out["lm_head.weight"] = (c.vocab, c.d)
    for i, kind in enumerate(c.pattern):
        p = f"backbone.layers.{i}."
        out[p + "norm.weight"] = (c.d,)
        m = p + "mixer."
        if kind == "M":
            out.update({
                m + "in_proj.weight": (c.d_in_proj, c.d),
                m + "conv1d.weight": (c.conv_dim, 1, c.d_conv),
                m + "conv1d.bias": (c.conv_dim,),
                m + "dt_bias": (c.heads,), m + "A_log": (c.heads,), m + "D": (c.heads,),
                m + "norm.weight": (c.d_inner,),
                m + "out_proj.weight": (c.d, c.d_inner),
            })
        elif kind == "*":
            q, kv = c.attn_heads * c.attn_head_dim, c.kv_heads * c.attn_head_dim
            out.update({m + "q_proj.weight": (q, c.d), m + "k_proj.weight": (kv, c.d),
                        m + "v_proj.weight": (kv, c.d), m + "o_proj.weight": (c.d, q)})
        else:
            out.update({m + "up_proj.weight": (c.inter, c.d),
                        m + "down_proj.weight": (c.d, c.inter)})
    return out


@dataclasses.dataclass
class MambaState:
    conv_tail: torch.Tensor  # [K-1, conv_dim]
    ssm: torch.Tensor  # [H, P, N]


@dataclasses.dataclass
class MambaDims:
    heads: int  # H
    head_dim: int  # P; d_inner = H * P
    groups: int  # G
    d_state: int  # N
    d_conv: int  # K
    chunk: int  # SSD chunk of the prefill form
    eps: float  # the gated norm's

    @property
    def d_inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.groups * self.d_state


def new_mamba_state(c: MambaDims) -> "MambaState":
    return MambaState(torch.zeros(c.d_conv - 1, c.conv_dim, dtype=torch.float64),
                      torch.zeros(c.heads, c.head_dim, c.d_state, dtype=torch.float64))


def mamba2_layer(w: dict, m: str, c: MambaDims, u, st: "MambaState", recurrent: bool):
    """The Mamba-2 mixer under the module prefix `m` (in_proj, conv1d,
    dt_bias, A_log, D, norm, out_proj) over u [T, d], advancing `st`: the
    chunked SSD (prefill) or the recurrence (recurrent)."""
    e, k, t = c.d_inner, c.d_conv, u.shape[0]
    zxbcdt = u @ w[m + "in_proj.weight"].T
    z, xbc, dt_raw = (zxbcdt[:, :e], zxbcdt[:, e:e + c.conv_dim],
                      zxbcdt[:, e + c.conv_dim:])
    full = torch.cat([st.conv_tail, xbc], dim=0)
    taps = w[m + "conv1d.weight"][:, 0, :]  # [conv_dim, K]
    conv = torch.stack([(full[i:i + k] * taps.T).sum(0) for i in range(t)])
    st.conv_tail = full[-(k - 1):].clone() if k > 1 else full[:0].clone()
    xbc = F.silu(conv + w[m + "conv1d.bias"])
    gn = c.groups * c.d_state
    x = xbc[:, :e].reshape(t, c.heads, c.head_dim)
    rep = c.heads // c.groups  # contiguous: head h reads group h // rep
    b = xbc[:, e:e + gn].reshape(t, c.groups, c.d_state).repeat_interleave(rep, dim=1)
    cc = xbc[:, e + gn:].reshape(t, c.groups, c.d_state).repeat_interleave(rep, dim=1)
    delta = softplus(dt_raw + w[m + "dt_bias"])
    a = -torch.exp(w[m + "A_log"])
    d = w[m + "D"]
    if recurrent:
        ys = []
        for i in range(t):
            y, st.ssm = ssd_step(x[i], delta[i], a, b[i], cc[i], d, st.ssm)
            ys.append(y)
        y = torch.stack(ys)
    else:
        y, st.ssm = ssd_chunked(x, delta, a, b, cc, d, st.ssm, c.chunk)
    v = (y.reshape(t, e) * F.silu(z)).reshape(t, c.groups, e // c.groups)
    v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + c.eps)
    return (v.reshape(t, e) * w[m + "norm.weight"]) @ w[m + "out_proj.weight"].T


@dataclasses.dataclass
class KvState:
    keys: torch.Tensor  # [T, Hkv, hd]
    values: torch.Tensor


def gqa_attention(w: dict, m: str, heads: int, kv_heads: int, hd: int, scale: float,
                  x, st: "KvState", start: int):
    """Causal grouped-query attention with no positional encoding under the
    module prefix `m` (q/k/v/o_proj): x [T, d] read after `start` tokens,
    appending its keys and values to `st`; head h reads KV head
    h // (heads / kv_heads); softmax(q k^T * scale) v."""
    t = x.shape[0]
    q = (x @ w[m + "q_proj.weight"].T).view(t, heads, hd)
    k = (x @ w[m + "k_proj.weight"].T).view(t, kv_heads, hd)
    v = (x @ w[m + "v_proj.weight"].T).view(t, kv_heads, hd)
    st.keys = torch.cat([st.keys, k])
    st.values = torch.cat([st.values, v])
    g = heads // kv_heads
    kk = st.keys.repeat_interleave(g, dim=1)
    vv = st.values.repeat_interleave(g, dim=1)
    s = torch.einsum("thd,jhd->htj", q, kk) * scale
    mask = torch.arange(kk.shape[0])[None, :] > (start + torch.arange(t))[:, None]
    s = s.masked_fill(mask[None], float("-inf"))
    o = torch.einsum("htj,jhd->thd", torch.softmax(s, -1), vv).reshape(t, -1)
    return o @ w[m + "o_proj.weight"].T


@dataclasses.dataclass
class HybridState:
    layers: List[Optional[object]]  # MambaState | KvState | None (MLP)
    token_count: int = 0

    def clone(self) -> "HybridState":
        return copy.deepcopy(self)


def read_checked_dir(path: str, parse_config, shapes_of):
    """(config, weights) of a model directory, every tensor checked against
    the shapes the parsed config gives (ValueError naming the first that
    differs)."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = parse_config(json.load(f))
    w, _ = read_safetensors(os.path.join(path, "model.safetensors"))
    for name, shape in shapes_of(cfg).items():
        if tuple(w[name].shape) != tuple(shape):
            raise ValueError(f"{name}: shape {tuple(w[name].shape)}, expected {shape}")
    return cfg, w


class NemotronHReference:
    def __init__(self, cfg: NemotronHConfig, w: dict):
        self.cfg = cfg
        self.w = {k: v.to(torch.float64) for k, v in w.items()}
        self.vocab_size = cfg.vocab

    @staticmethod
    def from_dir(path: str) -> "NemotronHReference":
        return NemotronHReference(*read_checked_dir(path, parse, shapes))

    def new_state(self) -> HybridState:
        c = self.cfg
        layers: List[Optional[object]] = []
        for kind in c.pattern:
            if kind == "M":
                layers.append(new_mamba_state(MambaDims(c.heads, c.head_dim, c.groups,
                                                        c.d_state, c.d_conv, c.chunk, c.eps)))
            elif kind == "*":
                z = torch.zeros(0, c.kv_heads, c.attn_head_dim, dtype=torch.float64)
                layers.append(KvState(z.clone(), z.clone()))
            else:
                layers.append(None)
        return HybridState(layers)

    def _mamba(self, u, m: str, st: MambaState, recurrent: bool):
        c = self.cfg
        return mamba2_layer(self.w, m, MambaDims(c.heads, c.head_dim, c.groups, c.d_state,
                                                 c.d_conv, c.chunk, c.eps), u, st, recurrent)

    def _attention(self, x, m: str, st: KvState, start: int):
        c = self.cfg
        return gqa_attention(self.w, m, c.attn_heads, c.kv_heads, c.attn_head_dim,
                             c.attn_head_dim**-0.5, x, st, start)

    def _mlp(self, x, m: str):
        w = self.w
        return torch.relu(x @ w[m + "up_proj.weight"].T).pow(2) @ w[m + "down_proj.weight"].T

    def _forward(self, tokens: Sequence[int], state: HybridState, recurrent: bool):
        c, w = self.cfg, self.w
        h = w["backbone.embeddings.weight"][torch.tensor(list(tokens), dtype=torch.long)]
        start = state.token_count
        for i, kind in enumerate(c.pattern):
            p = f"backbone.layers.{i}."
            x = rms_norm(h, w[p + "norm.weight"], c.eps)
            m = p + "mixer."
            if kind == "M":
                h = h + self._mamba(x, m, state.layers[i], recurrent)
            elif kind == "*":
                h = h + self._attention(x, m, state.layers[i], start)
            else:
                h = h + self._mlp(x, m)
        state.token_count += len(tokens)
        head = w["backbone.embeddings.weight"] if c.tied else w["lm_head.weight"]
        return rms_norm(h, w["backbone.norm_f.weight"], c.eps) @ head.T

    def prefill(self, tokens: List[int], state: HybridState) -> torch.Tensor:
        """Logits of every position [T, V]: chunked SSD, masked attention."""
        return self._forward(tokens, state, False)

    def step(self, token: int, state: HybridState) -> torch.Tensor:
        """Logits [V] of one token: the SSM recurrence."""
        return self._forward([token], state, True)[0]

    def state_tensors(self, state: HybridState) -> List[torch.Tensor]:
        out = []
        for s in state.layers:
            if isinstance(s, MambaState):
                out += [s.conv_tail, s.ssm]
            elif isinstance(s, KvState):
                out += [s.keys, s.values]
        return out
