"""Layer math of Based and JRT-RNN in float64, each in two forms.

Every mixer has a parallel form (`forward`: a chunk of T tokens at once,
continuing from a state) and a recurrent form (`step`: one token), written
separately so that each checks the other. Shapes: x [T, d]; heads split
head-major (head h owns columns h*hd .. h*hd+hd-1). Linear weights are
[out, in] (y = x W^T + b), as upstream stores them.

  RMSNorm      y = x * w / sqrt(mean(x^2) + eps)
  SwiGLU MLP   (a, g) = halves of x W1^T; y = (a * silu(g)) W2^T
  BaseConv     (u1, u2) = halves of x Win^T + bin; c = causal depthwise
               conv (K taps, tap K-1 on the current token) of u1;
               y = (silu(c) * u2) Wout^T + bout
  Taylor map   phi(x) = [1, x / F^(1/4), vec(x x^T) / (sqrt 2 sqrt F)]
  Linear attn  y_i = num_i * 1 / (den_i + eps) over keys j <= i (parallel);
               S += v (x) phi(k), z += phi(k), y = S phi(q) / (z.phi(q) + eps)
  Prefix LA    the same plus an encoder sum over the first M' tokens, seen
               by every query (JRT-RNN, prefix mode only)
  Window attn  softmax(q.k / sqrt(hd)) over keys p - L .. p, RoPE
               rotate-half on q and k at absolute positions
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict

import torch

Weights = Dict[str, torch.Tensor]


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def silu(x: torch.Tensor) -> torch.Tensor:
    return x / (1.0 + torch.exp(-x))


def swiglu_mlp(x: torch.Tensor, fc1: torch.Tensor, fc2: torch.Tensor) -> torch.Tensor:
    u = x @ fc1.T
    a, g = u.chunk(2, dim=-1)  # the second half is the gated branch
    return (a * silu(g)) @ fc2.T


def taylor_features(x: torch.Tensor) -> torch.Tensor:
    """phi over the last axis (F) -> 1 + F + F^2 features (row-major x_m x_n)."""
    f = x.shape[-1]
    one = torch.ones(x.shape[:-1] + (1,), dtype=x.dtype)
    quad = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)
    return torch.cat([one, x / f**0.25, quad / (math.sqrt(2.0) * math.sqrt(f))], -1)


# ---------------------------------------------------------------- BaseConv


@dataclasses.dataclass
class ConvState:
    tail: torch.Tensor  # [K-1, C]: the last K-1 rows of u1, zeros before t=0


class BaseConv:
    def __init__(self, w: Weights, p: str, kernel_size: int):
        self.w_in = w[p + "mixer.in_proj.weight"]  # [2C, d]
        self.b_in = w[p + "mixer.in_proj.bias"]
        self.w_out = w[p + "mixer.out_proj.weight"]  # [d, C]
        self.b_out = w[p + "mixer.out_proj.bias"]
        self.taps = w[p + "mixer.conv.conv.weight"]  # [C, 1, K]
        self.c = self.w_out.shape[1]
        self.k = kernel_size
        assert self.taps.shape == (self.c, 1, self.k), self.taps.shape

    def new_state(self) -> ConvState:
        return ConvState(torch.zeros(self.k - 1, self.c, dtype=torch.float64))

    def _split(self, x):
        u = x @ self.w_in.T + self.b_in
        return u[..., : self.c], u[..., self.c :]

    def forward(self, x, st: ConvState, start: int, **_) -> torch.Tensor:
        u1, u2 = self._split(x)
        ext = torch.cat([st.tail, u1])  # [K-1+T, C]
        # Depthwise conv1d without padding: output t sees ext[t .. t+K-1].
        c = torch.nn.functional.conv1d(ext.T.unsqueeze(0), self.taps, groups=self.c)
        st.tail = ext[-(self.k - 1) :].clone()
        return (silu(c[0].T) * u2) @ self.w_out.T + self.b_out

    def step(self, x, st: ConvState, pos: int, **_) -> torch.Tensor:
        u1, u2 = self._split(x)
        window = torch.cat([st.tail, u1[None]])  # [K, C], oldest first
        c = (window.T * self.taps[:, 0, :]).sum(-1)
        st.tail = window[1:].clone()
        return (silu(c) * u2) @ self.w_out.T + self.b_out


# ---------------------------------------------------------- linear attention


@dataclasses.dataclass
class LinearAttentionState:
    s: torch.Tensor  # [H, hd, D]  s[h, e, m] = sum_t phi(k_t)[m] v_t[e]
    z: torch.Tensor  # [H, D]      z[h, m] = sum_t phi(k_t)[m]


class LinearAttention:
    """Based Taylor linear attention; with encoder weights, JRT's prefix
    linear attention (whose decoding is plain Based)."""

    def __init__(self, w: Weights, p: str, heads: int, eps: float, prefix: bool):
        self.wq = w[p + "mixer.proj_q.weight"]  # [H F, d]
        self.wk = w[p + "mixer.proj_k.weight"]
        self.wv = w[p + "mixer.proj_v.weight"]  # [d, d]
        self.wo = w[p + "mixer.out_proj.weight"]
        self.wk_enc = w[p + "mixer.proj_k_enc.weight"] if prefix else None
        self.wv_enc = w[p + "mixer.proj_v_enc.weight"] if prefix else None
        self.h = heads
        self.f = self.wq.shape[0] // heads
        self.hd = self.wv.shape[0] // heads
        self.eps = eps
        self.dim = 1 + self.f + self.f * self.f

    def new_state(self) -> LinearAttentionState:
        return LinearAttentionState(
            torch.zeros(self.h, self.hd, self.dim, dtype=torch.float64),
            torch.zeros(self.h, self.dim, dtype=torch.float64),
        )

    def _qkv(self, x, keep, wk, wv):
        """phi(q), phi(k) [T, H, D] and v [T, H, hd]; keys of positions where
        keep is False are zeroed before the feature map (JRT pad mask)."""
        t = x.shape[0]
        q = (x @ self.wq.T).view(t, self.h, self.f)
        k = (x @ wk.T).view(t, self.h, self.f)
        if keep is not None:
            k = k * keep.to(k.dtype)[:, None, None]
        v = (x @ wv.T).view(t, self.h, self.hd)
        return taylor_features(q), taylor_features(k), v

    def _encoder_keys(self, x, keep, enc: int):
        """phi(ke) [M', H, D], ve [M', H, hd] over the first `enc` rows."""
        t = min(enc, x.shape[0])
        k = (x[:t] @ self.wk_enc.T).view(t, self.h, self.f)
        if keep is not None:
            k = k * keep[:t].to(k.dtype)[:, None, None]
        v = (x[:t] @ self.wv_enc.T).view(t, self.h, self.hd)
        return taylor_features(k), v

    def forward(self, x, st: LinearAttentionState, start: int, keep=None, enc=0):
        """Parallel ("quadratic") form over x [T, d]. enc > 0: JRT prefix
        mode from an empty state, encoder over the first min(enc, T) tokens."""
        t = x.shape[0]
        fq, fk, v = self._qkv(x, keep, self.wk, self.wv)
        a = torch.einsum("ihm,jhm->hij", fq, fk) * torch.ones(t, t, dtype=torch.float64).tril()
        num = torch.einsum("hij,jhe->ihe", a, v) + torch.einsum("ihm,hem->ihe", fq, st.s)
        den = a.sum(-1).T + torch.einsum("ihm,hm->ih", fq, st.z)
        s_new = st.s + torch.einsum("jhe,jhm->hem", v, fk)
        z_new = st.z + fk.sum(0)
        if enc > 0:
            assert start == 0, "prefix mode starts from an empty state"
            fke, ve = self._encoder_keys(x, keep, enc)
            a_enc = torch.einsum("ihm,jhm->hij", fq, fke)  # non-causal
            num = num + torch.einsum("hij,jhe->ihe", a_enc, ve)
            den = den + a_enc.sum(-1).T
            s_new = s_new + torch.einsum("jhe,jhm->hem", ve, fke)
            z_new = z_new + fke.sum(0)
        st.s, st.z = s_new, z_new
        y = num * (1.0 / (den + self.eps))[..., None]
        return y.reshape(t, -1) @ self.wo.T

    def encode_prefix(self, x, st: LinearAttentionState, keep=None, enc=0):
        """Recurrent form of the encoder: adds the encoder sums of the first
        min(enc, T) rows of x into an empty state before decoding them."""
        fke, ve = self._encoder_keys(x, keep, enc)
        for j in range(fke.shape[0]):
            st.s += ve[j][:, :, None] * fke[j][:, None, :]
            st.z += fke[j]

    def step(self, x, st: LinearAttentionState, pos: int, keep=None, **_):
        k_keep = None if keep is None else torch.tensor([bool(keep)])
        fq, fk, v = self._qkv(x[None], k_keep, self.wk, self.wv)
        st.s += v[0][:, :, None] * fk[0][:, None, :]  # update, then read
        st.z += fk[0]
        num = torch.einsum("hem,hm->he", st.s, fq[0])
        den = torch.einsum("hm,hm->h", st.z, fq[0])
        y = num / (den + self.eps)[:, None]
        return y.reshape(-1) @ self.wo.T


# ------------------------------------------------- sliding-window attention


@dataclasses.dataclass
class WindowState:
    keys: torch.Tensor  # [n, H, hd] post-rotary keys of the last n <= L tokens
    values: torch.Tensor  # [n, H, hd]
    count: int = 0  # tokens read; the next token's position


def rope(x: torch.Tensor, pos: torch.Tensor, base: float) -> torch.Tensor:
    """Rotate-half RoPE of x [T, H, hd] at positions pos [T]."""
    hd = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angle = pos.to(torch.float64)[:, None] * inv_freq[None, :]  # [T, hd/2]
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class SlidingWindowAttention:
    def __init__(self, w: Weights, p: str, heads: int, window: int, base: float):
        self.wqkv = w[p + "mixer.Wqkv.weight"]  # [3d, d]: q rows, k rows, v rows
        self.wo = w[p + "mixer.out_proj.weight"]
        self.h = heads
        self.d = self.wo.shape[0]
        self.hd = self.d // heads
        self.window = window  # L
        self.base = base

    def new_state(self) -> WindowState:
        empty = torch.zeros(0, self.h, self.hd, dtype=torch.float64)
        return WindowState(empty, empty.clone())

    def _qkv(self, x, pos):
        t = x.shape[0]
        qkv = (x @ self.wqkv.T).view(t, 3, self.h, self.hd)
        q = rope(qkv[:, 0], pos, self.base)
        k = rope(qkv[:, 1], pos, self.base)
        return q, k, qkv[:, 2]

    def forward(self, x, st: WindowState, start: int, **_):
        t = x.shape[0]
        assert st.count == start
        qpos = torch.arange(start, start + t)
        q, k, v = self._qkv(x, qpos)
        keys, values = torch.cat([st.keys, k]), torch.cat([st.values, v])
        kpos = torch.arange(start - st.keys.shape[0], start + t)
        allowed = (kpos[None, :] <= qpos[:, None]) & (
            kpos[None, :] >= qpos[:, None] - self.window
        )
        scores = torch.einsum("ihe,jhe->hij", q, keys) / math.sqrt(self.hd)
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        y = torch.einsum("hij,jhe->ihe", torch.softmax(scores, -1), values)
        st.keys, st.values = keys[-self.window :].clone(), values[-self.window :].clone()
        st.count = start + t
        return y.reshape(t, -1) @ self.wo.T

    def step(self, x, st: WindowState, pos: int, **_):
        q, k, v = self._qkv(x[None], torch.tensor([pos]))
        keys = torch.cat([st.keys, k])[-(self.window + 1) :]  # L previous + self
        values = torch.cat([st.values, v])[-(self.window + 1) :]
        out = torch.empty(self.h, self.hd, dtype=torch.float64)
        for h in range(self.h):
            s = keys[:, h] @ q[0, h] / math.sqrt(self.hd)
            p = torch.exp(s - s.max())
            out[h] = (p / p.sum()) @ values[:, h]
        st.keys, st.values = keys[-self.window :].clone(), values[-self.window :].clone()
        st.count = pos + 1
        return out.reshape(-1) @ self.wo.T
