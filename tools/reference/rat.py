"""Float64 reference of RAT (Wei, Yadav, Pascanu, Gulcehre 2025; layout of
CLAIRE-Labo/RAT), optionally interleaved with sliding-window attention,
written from the paper's equations and the layer description in
shared/reference/mamba2_rat_sp.md §2, in two forms:

  prefill (the training form): per layer the gated EMA over the whole read,
    then (a) softmax attention of each query against the chunk-final keys of
    strictly earlier chunks, giving o_inter and its log-sum-exp lam_inter
    (-inf in chunk 0), (b) the own-key logit lam_intra, (c) the merge
    m = max, w_i = e^(lam_inter-m) / (e^(lam_inter-m) + e^(lam_intra-m)),
    o = w_i o_inter + (1 - w_i) v_bar  (§2.4 step 7).
  step (the decode form, §2.6): a chunk cache whose slot c holds the
    running post-RoPE k_bar / v_bar of the open chunk, attention over slots
    0..c in one softmax.

Per RAT layer, token t in chunk c at offset l, x = RMSNorm(h):
  [z~ | v | g~ | q~ | k~] = x in_proj^T, widths D, D, D, G hd, G hd
  z = sigmoid(z~), g = sigmoid(g~ + gate_bias); q, k tiled H/G times
  k_bar = (1-g) k at l = 0, else g k_bar + (1-g) k; v_bar likewise
  q, k_bar rotated (rotate-half) by the chunk index c; v_bar not rotated
  h += out_proj(z * o)
SWA layer (odd layers when interleave_step = 2): [v | q | k] = x in_proj^T,
token RoPE, softmax over keys t - window .. t, h += out_proj(o).
Every layer: h += fc2(gelu(fc1(RMSNorm(h; ln)))) (exact erf GELU).
Final RMSNorm, tied head.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import List, Optional

import torch

from reference.layers import rms_norm, rope
from reference.safetensors_io import read_safetensors


@dataclasses.dataclass
class RatConfig:
    d: int
    layers: int
    heads: int
    groups: int
    chunk: int
    ffn: int
    vocab: int
    eps: float
    base: float
    interleave: int
    window: int

    @property
    def hd(self) -> int:
        return self.d // self.heads

    def is_swa(self, i: int) -> bool:
        return self.interleave == 2 and i % 2 == 1


def parse(cfg: dict) -> RatConfig:
    d = cfg["d_model"]
    return RatConfig(d=d, layers=cfg["num_layers"], heads=cfg["num_heads"],
                     groups=cfg.get("ngroups", 2), chunk=cfg.get("chunk_size", 16),
                     ffn=cfg.get("ffn_hidden", 4 * d), vocab=cfg["vocab_size"],
                     eps=cfg.get("norm_eps", 1e-6), base=cfg.get("rope_base", 1e4),
                     interleave=cfg.get("interleave_step", 0), window=cfg.get("window", 1024))


def shapes(c: RatConfig) -> dict:
    out = {"embedding.wte.weight": (c.vocab, c.d), "backbone.ln.weight": (c.d,)}
    for i in range(c.layers):
        p = f"backbone.layers.{i}."
        out[p + "seq_layer.input_norm.weight"] = (c.d,)
        if c.is_swa(i):
            out[p + "seq_layer.in_proj.weight"] = (3 * c.d, c.d)
        else:
            out[p + "seq_layer.in_proj.weight"] = (3 * c.d + 2 * c.groups * c.hd, c.d)
            out[p + "seq_layer.gate_bias"] = (c.d,)
        out[p + "seq_layer.out_proj.weight"] = (c.d, c.d)
        out[p + "hidden_layer.ln.weight"] = (c.d,)
        out[p + "hidden_layer.fc1.weight"] = (c.ffn, c.d)
        out[p + "hidden_layer.fc2.weight"] = (c.d, c.ffn)
    return out


@dataclasses.dataclass
class RatLayerState:
    """Engine layout: closed [C, 2, D] (post-RoPE k_bar | v_bar of each closed
    chunk), open [2, D] (pre-RoPE running k_bar | v_bar)."""
    closed: torch.Tensor
    open: torch.Tensor
    count: int = 0


@dataclasses.dataclass
class SwaState:
    keys: torch.Tensor  # [n, H, hd] post-RoPE, all tokens read (the engine keeps the last `window`)
    values: torch.Tensor
    count: int = 0


@dataclasses.dataclass
class RatState:
    layers: list
    token_count: int = 0

    def clone(self) -> "RatState":
        return RatState([dataclasses.replace(s, **{f.name: getattr(s, f.name).clone()
                                                   for f in dataclasses.fields(s)
                                                   if f.name != "count"})
                         for s in self.layers], self.token_count)


def gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class RatReference:
    def __init__(self, cfg: RatConfig, w: dict):
        self.cfg = cfg
        self.w = {k: v.to(torch.float64) for k, v in w.items()}
        self.vocab_size = cfg.vocab

    @staticmethod
    def from_dir(path: str) -> "RatReference":
        with open(os.path.join(path, "config.json")) as f:
            cfg = parse(json.load(f))
        w, _ = read_safetensors(os.path.join(path, "model.safetensors"))
        return RatReference(cfg, w)

    def new_state(self) -> RatState:
        c = self.cfg
        layers = []
        for i in range(c.layers):
            if c.is_swa(i):
                z = torch.zeros(0, c.heads, c.hd, dtype=torch.float64)
                layers.append(SwaState(z.clone(), z.clone()))
            else:
                layers.append(RatLayerState(torch.zeros(0, 2, c.d, dtype=torch.float64),
                                            torch.zeros(2, c.d, dtype=torch.float64)))
        return RatState(layers)

    # --- shared pieces -------------------------------------------------
    def _project(self, x, p):
        c, w = self.cfg, self.w
        u = x @ w[p + "in_proj.weight"].T
        d, qk = c.d, c.groups * c.hd
        z = torch.sigmoid(u[:, :d])
        v = u[:, d:2 * d]
        g = torch.sigmoid(u[:, 2 * d:3 * d] + w[p + "gate_bias"])
        rep = c.heads // c.groups
        q = u[:, 3 * d:3 * d + qk].repeat(1, rep)  # tiled: head j uses group j % G
        k = u[:, 3 * d + qk:].repeat(1, rep)
        return z, v, g, q, k

    def _rot(self, x, chunk_idx):
        c = self.cfg
        t = x.shape[0]
        return rope(x.view(t, c.heads, c.hd), chunk_idx, c.base)  # [T, H, hd]

    # --- RAT layer, training (parallel) form ------------------------------
    def _rat_parallel(self, x, p, st: RatLayerState):
        c = self.cfg
        t = x.shape[0]
        z, v, g, q, k = self._project(x, p)
        start = st.count
        pos = torch.arange(start, start + t)
        chunk = pos // c.chunk
        kb, vb = torch.zeros_like(k), torch.zeros_like(v)
        rk, rv = st.open[0].clone(), st.open[1].clone()
        for i in range(t):  # the EMA, reset at each chunk start
            if int(pos[i]) % c.chunk == 0:
                rk, rv = (1 - g[i]) * k[i], (1 - g[i]) * v[i]
            else:
                rk, rv = g[i] * rk + (1 - g[i]) * k[i], g[i] * rv + (1 - g[i]) * v[i]
            kb[i], vb[i] = rk, rv
        qr = self._rot(q, chunk)
        kr = self._rot(kb, chunk)
        # Closed chunks: the state's plus those this read closes.
        ends = [i for i in range(t) if int(pos[i]) % c.chunk == c.chunk - 1]
        new_rows = torch.stack([torch.stack([kr[i].reshape(-1), vb[i]]) for i in ends]) \
            if ends else torch.zeros(0, 2, c.d, dtype=torch.float64)
        closed = torch.cat([st.closed, new_rows])
        ck = closed[:, 0].view(-1, c.heads, c.hd)
        cv = closed[:, 1].view(-1, c.heads, c.hd)
        scale = c.hd ** -0.5
        vbh = vb.view(t, c.heads, c.hd)
        # (a) inter-chunk attention with mask chunk(q) > kv index.
        s = torch.einsum("thd,chd->htc", qr, ck) * scale
        mask = torch.arange(ck.shape[0])[None, :] >= chunk[:, None]  # [T, C]
        s = s.masked_fill(mask[None], float("-inf"))
        lam_inter = torch.logsumexp(s, -1)  # [H, T], -inf in chunk 0
        pr = torch.where(torch.isinf(lam_inter)[..., None], torch.zeros_like(s),
                         torch.exp(s - lam_inter[..., None]))
        o_inter = torch.einsum("htc,chd->thd", pr, cv)
        # (b) own-state logit, (c) merge.
        lam_intra = (qr * kr).sum(-1).T * scale  # [H, T]
        m = torch.maximum(lam_inter, lam_intra)
        ei, ea = torch.exp(lam_inter - m), torch.exp(lam_intra - m)
        wi = (ei / (ei + ea)).T[..., None]  # [T, H, 1]
        o = wi * o_inter + (1 - wi) * vbh
        st.closed = closed
        st.open = torch.stack([rk, rv])
        st.count += t
        return (z * o.reshape(t, -1)) @ self.w[p + "out_proj.weight"].T

    # --- RAT layer, decode form (upstream step with a chunk cache) --------
    def _rat_step(self, x, p, st: RatLayerState):
        c = self.cfg
        z, v, g, q, k = self._project(x, p)
        pos = st.count
        cidx = pos // c.chunk
        if pos % c.chunk == 0:
            rk, rv = (1 - g[0]) * k[0], (1 - g[0]) * v[0]
        else:
            rk, rv = g[0] * st.open[0] + (1 - g[0]) * k[0], g[0] * st.open[1] + (1 - g[0]) * v[0]
        ci = torch.tensor([cidx])
        qr = self._rot(q, ci)[0]  # [H, hd]
        kr = self._rot(rk[None], ci)[0]
        # kcache slots 0..c: closed chunk finals, slot c = the open chunk.
        kc = torch.cat([st.closed[:, 0].view(-1, c.heads, c.hd), kr[None]])
        vc = torch.cat([st.closed[:, 1].view(-1, c.heads, c.hd), rv.view(1, c.heads, c.hd)])
        s = torch.einsum("hd,chd->hc", qr, kc) * c.hd ** -0.5
        o = torch.einsum("hc,chd->hd", torch.softmax(s, -1), vc).reshape(1, -1)
        if pos % c.chunk == c.chunk - 1:
            st.closed = torch.cat([st.closed, torch.stack([kr.reshape(-1), rv])[None]])
        st.open = torch.stack([rk, rv])
        st.count += 1
        return (z * o) @ self.w[p + "out_proj.weight"].T

    # --- SWA layer ------------------------------------------------------
    def _swa(self, x, p, st: SwaState, causal_block: bool):
        c, w = self.cfg, self.w
        t = x.shape[0]
        u = x @ w[p + "in_proj.weight"].T
        v = u[:, :c.d].view(t, c.heads, c.hd)
        pos = torch.arange(st.count, st.count + t)
        q = rope(u[:, c.d:2 * c.d].view(t, c.heads, c.hd), pos, c.base)
        k = rope(u[:, 2 * c.d:].view(t, c.heads, c.hd), pos, c.base)
        st.keys, st.values = torch.cat([st.keys, k]), torch.cat([st.values, v])
        kpos = torch.arange(st.keys.shape[0])
        s = torch.einsum("thd,jhd->htj", q, st.keys) * c.hd ** -0.5
        bad = (kpos[None, :] > pos[:, None]) | (kpos[None, :] < pos[:, None] - c.window)
        if not causal_block:
            bad = kpos[None, :] < pos[:, None] - c.window  # one token: nothing later exists
        s = s.masked_fill(bad[None], float("-inf"))
        o = torch.einsum("htj,jhd->thd", torch.softmax(s, -1), st.values).reshape(t, -1)
        st.count += t
        return o @ w[p + "out_proj.weight"].T

    def _forward(self, tokens, state: RatState, parallel: bool):
        c, w = self.cfg, self.w
        h = w["embedding.wte.weight"][torch.tensor(tokens)]
        for i in range(c.layers):
            p = f"backbone.layers.{i}."
            x = rms_norm(h, w[p + "seq_layer.input_norm.weight"], c.eps)
            st = state.layers[i]
            if c.is_swa(i):
                y = self._swa(x, p + "seq_layer.", st, parallel)
            elif parallel:
                y = self._rat_parallel(x, p + "seq_layer.", st)
            else:
                y = self._rat_step(x, p + "seq_layer.", st)
            h = h + y
            x = rms_norm(h, w[p + "hidden_layer.ln.weight"], c.eps)
            h = h + gelu(x @ w[p + "hidden_layer.fc1.weight"].T) @ w[p + "hidden_layer.fc2.weight"].T
        state.token_count += len(tokens)
        return rms_norm(h, w["backbone.ln.weight"], c.eps) @ w["embedding.wte.weight"].T

    def prefill(self, tokens: List[int], state: RatState) -> torch.Tensor:
        """Logits [T, V] of every position, training (chunk-parallel) form."""
        return self._forward(tokens, state, True)

    def step(self, token: int, state: RatState) -> torch.Tensor:
        """Logits [V] of one token, decode (chunk cache) form."""
        return self._forward([token], state, False)[0]

    def state_tensors(self, state: RatState) -> List[torch.Tensor]:
        out = []
        for s in state.layers:
            if isinstance(s, SwaState):
                out += [s.keys, s.values]
            else:
                out += [s.closed, s.open]
        return out
