"""Batched float32 training forms of Based, JRT-RNN, Mamba-2, Llama and the
Nemotron-H hybrid.

Parameters carry the upstream tensor names the engine and tools/reference
load, so export is a rename-free dump. Each forward takes tokens [B, T] and
an optional carried state (state passing) and returns logits [B, T, V_pad]
and the final state; train.py checks the exported model against the float64
reference (tools/reference) on the same tokens.

Fast forms used here, equal to the reference's math:
  Taylor linear attention: phi(q).phi(k) = 1 + q.k / sqrt(F) + (q.k)^2 / (2F),
    so the T x T score matrix is formed without the 1 + F + F^2 features;
    phi is materialised only for the carried state (S += v (x) phi(k)).
  Sliding-window attention: RoPE scores depend on relative positions only,
    so a carried window is rotated at positions -W .. -1.
  Mamba-2: the chunked SSD form of tools/reference/mamba2.py with a batch axis.
  Nemotron-H: the same SSD with G groups (head h reads group h // (H/G)),
    causal GQA attention without positional encoding, relu^2 MLP layers.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, base=10000.0):
    """x [B, T, H, hd], pos [T] (any integers)."""
    hd = x.shape[-1]
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = pos.to(torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def taylor_features(x):
    f = x.shape[-1]
    one = torch.ones(x.shape[:-1] + (1,), dtype=x.dtype)
    quad = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)
    return torch.cat([one, x / f**0.25, quad / (math.sqrt(2.0) * math.sqrt(f))], -1)


class Named(nn.Module):
    """Parameters by upstream name (dots kept in `names`)."""

    def __init__(self):
        super().__init__()
        self.names: List[str] = []

    def add(self, name: str, t: torch.Tensor) -> nn.Parameter:
        p = nn.Parameter(t.float())
        self.register_parameter(name.replace(".", "__"), p)
        self.names.append(name)
        return p

    def w(self, name: str) -> torch.Tensor:
        return getattr(self, name.replace(".", "__"))

    def tensors(self) -> Dict[str, torch.Tensor]:
        return {n: self.w(n).detach().contiguous() for n in self.names}


def _normal(shape, std, g):
    return torch.randn(shape, generator=g) * std


# ------------------------------------------------------------ Based / JRT


class BasedLM(Named):
    def __init__(self, cfg: dict, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.cfg = cfg
        d = cfg["n_embd"]
        L = cfg["n_layer"]
        m = cfg["pad_vocab_size_multiple"]
        self.vpad = (cfg["vocab_size"] + m - 1) // m * m
        self.jrt = cfg["architecture"] == "jrt"
        self.la_layers = set(cfg["alt_mixer_layers"])
        self.swa_layers = set(cfg["alt_mixer_2_layers"])
        self.heads = cfg["alt_mixer"]["num_heads"]
        self.feat = cfg["alt_mixer"]["feature_dim"]
        self.swa_heads = cfg["n_head"]
        self.window = cfg["alt_mixer_2"]["window_size"] // 2
        self.conv_c = cfg["mixer"]["expand_proj"] * d // 2
        self.k = 3
        hid = (cfg["n_inner"] + 255) // 256 * 256
        out_std = 0.02 / math.sqrt(2 * L)
        self.add("transformer.embeddings.word_embeddings.weight", _normal((self.vpad, d), 0.02, g))
        self.add("transformer.ln_f.weight", torch.ones(d))
        for i in range(L):
            p = f"transformer.layers.{i}."
            self.add(p + "norm1.weight", torch.ones(d))
            self.add(p + "norm2.weight", torch.ones(d))
            self.add(p + "mlp.fc1.weight", _normal((2 * hid, d), 0.02, g))
            self.add(p + "mlp.fc2.weight", _normal((d, hid), out_std, g))
            if i in self.swa_layers:
                self.add(p + "mixer.Wqkv.weight", _normal((3 * d, d), 0.02, g))
                self.add(p + "mixer.out_proj.weight", _normal((d, d), out_std, g))
            elif i in self.la_layers:
                qk = self.heads * self.feat
                self.add(p + "mixer.proj_q.weight", _normal((qk, d), 0.02, g))
                self.add(p + "mixer.proj_k.weight", _normal((qk, d), 0.02, g))
                self.add(p + "mixer.proj_v.weight", _normal((d, d), 0.02, g))
                if self.jrt:
                    self.add(p + "mixer.proj_k_enc.weight", _normal((qk, d), 0.02, g))
                    self.add(p + "mixer.proj_v_enc.weight", _normal((d, d), 0.02, g))
                self.add(p + "mixer.out_proj.weight", _normal((d, d), out_std, g))
            else:
                c = self.conv_c
                self.add(p + "mixer.in_proj.weight", _normal((2 * c, d), 0.02, g))
                self.add(p + "mixer.in_proj.bias", torch.zeros(2 * c))
                self.add(p + "mixer.out_proj.weight", _normal((d, c), out_std, g))
                self.add(p + "mixer.out_proj.bias", torch.zeros(d))
                self.add(p + "mixer.conv.conv.weight", _normal((c, 1, self.k), 0.1, g))

    # State per layer: conv tail [B, K-1, C]; linear attention (S [B, H, hd,
    # D], z [B, H, D]); window (k [B, W, H, hd] pre-RoPE, v, valid [B, W]).
    def _conv(self, p, x, st):
        c = self.conv_c
        u = x @ self.w(p + "mixer.in_proj.weight").T + self.w(p + "mixer.in_proj.bias")
        u1, u2 = u[..., :c], u[..., c:]
        b = x.shape[0]
        tail = st if st is not None else x.new_zeros(b, self.k - 1, c)
        ext = torch.cat([tail, u1], 1)  # [B, K-1+T, C]
        conv = F.conv1d(ext.transpose(1, 2), self.w(p + "mixer.conv.conv.weight"), groups=c)
        y = (F.silu(conv.transpose(1, 2)) * u2) @ self.w(p + "mixer.out_proj.weight").T
        return y + self.w(p + "mixer.out_proj.bias"), ext[:, -(self.k - 1):]

    def _la(self, p, x, st, keep, enc, want_state):
        b, t, _ = x.shape
        h, f = self.heads, self.feat
        q = (x @ self.w(p + "mixer.proj_q.weight").T).view(b, t, h, f)
        k = (x @ self.w(p + "mixer.proj_k.weight").T).view(b, t, h, f)
        v = (x @ self.w(p + "mixer.proj_v.weight").T).view(b, t, h, -1)
        if keep is not None:
            k = k * keep[:, :, None, None]
        num, den, new_state = self._la_causal(q, k, v, st, want_state)
        if enc > 0:
            m = min(enc, t)
            ke = (x[:, :m] @ self.w(p + "mixer.proj_k_enc.weight").T).view(b, m, h, f)
            if keep is not None:
                ke = ke * keep[:, :m, None, None]
            ve = (x[:, :m] @ self.w(p + "mixer.proj_v_enc.weight").T).view(b, m, h, -1)
            se = torch.einsum("bihf,bjhf->bhij", q, ke)
            ae = 1 + se / math.sqrt(f) + se * se / (2 * f)
            num = num + torch.einsum("bhij,bjhe->bihe", ae, ve)
            den = den + ae.sum(-1).transpose(1, 2)
        if enc > 0 and new_state is not None:
            fke = taylor_features(ke.transpose(1, 2))
            new_state = (new_state[0] + ve.transpose(1, 2).transpose(-1, -2) @ fke,
                         new_state[1] + fke.sum(2))
        y = num / (den + 1e-12)[..., None]
        return y.reshape(b, t, -1) @ self.w(p + "mixer.out_proj.weight").T, new_state

    def _la_causal(self, q, k, v, st, want_state):
        """Causal Taylor linear attention over the whole read: the score
        polynomial 1 + s / sqrt(F) + s^2 / (2F) (s = q.k) under a causal mask,
        plus the carried state read through phi(q). Returns num [B, T, H, hd],
        den [B, T, H] and, when asked, the final state."""
        b, t, h, f = q.shape
        qh, kh, vh = (u.transpose(1, 2) for u in (q, k, v))  # [B, H, T, .]
        s = qh @ kh.transpose(-1, -2)  # [B, H, T, T]
        a = (1 + s / math.sqrt(f) + s * s / (2 * f)) * torch.ones(t, t).tril()
        num = a @ vh  # [B, H, T, hd]
        den = a.sum(-1)  # [B, H, T]
        if st is not None:
            fq = taylor_features(qh)  # [B, H, T, D]
            num = num + fq @ st[0].transpose(-1, -2)
            den = den + (fq @ st[1][..., None])[..., 0]
        new_state = None
        if want_state:
            fk = taylor_features(kh)
            s1 = vh.transpose(-1, -2) @ fk  # [B, H, hd, D]
            z1 = fk.sum(2)
            if st is not None:
                s1, z1 = s1 + st[0], z1 + st[1]
            new_state = (s1, z1)
        return num.transpose(1, 2), den.transpose(1, 2), new_state

    def _swa(self, p, x, st):
        b, t, d = x.shape
        h = self.swa_heads
        hd = d // h
        wsz = self.window
        qkv = (x @ self.w(p + "mixer.Wqkv.weight").T).view(b, t, 3, h, hd)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if st is None:
            pk = x.new_zeros(b, wsz, h, hd)
            pv = x.new_zeros(b, wsz, h, hd)
            pvalid = torch.zeros(b, wsz, dtype=torch.bool)
        else:
            pk, pv, pvalid = st
        keys = torch.cat([pk, k], 1)
        values = torch.cat([pv, v], 1)
        valid = torch.cat([pvalid, torch.ones(b, t, dtype=torch.bool)], 1)  # [B, W+T]
        # Blocked: query block n (positions nW .. nW+W-1) sees key block
        # n-1 and n (positions nW-W .. nW+W-1); query i of the block may
        # read key j of that pair when i <= j <= i + W.
        pad = (-t) % wsz
        n = (t + pad) // wsz
        qr = rope(F.pad(q, (0, 0, 0, 0, 0, pad)), torch.arange(t + pad))
        kr = rope(F.pad(keys, (0, 0, 0, 0, 0, pad)), torch.arange(-wsz, t + pad))
        vp = F.pad(values, (0, 0, 0, 0, 0, pad))
        okp = F.pad(valid, (0, pad))
        kb = kr.unfold(1, 2 * wsz, wsz)  # [B, n, H, hd, 2W]
        vb = vp.unfold(1, 2 * wsz, wsz)
        ob = okp.unfold(1, 2 * wsz, wsz)  # [B, n, 2W]
        qb = qr.view(b, n, wsz, h, hd)
        i = torch.arange(wsz)[:, None]
        j = torch.arange(2 * wsz)[None, :]
        allowed = (j >= i) & (j <= i + wsz)  # [W, 2W]
        mask = allowed[None, None, None] & ob[:, :, None, None, :]
        scores = torch.einsum("bnihe,bnhej->bnhij", qb, kb) / math.sqrt(hd)
        scores = scores.masked_fill(~mask, float("-inf"))
        y = torch.einsum("bnhij,bnhej->bnihe", torch.softmax(scores, -1), vb)
        y = y.reshape(b, n * wsz, d)[:, :t] @ self.w(p + "mixer.out_proj.weight").T
        return y, (keys[:, -wsz:], values[:, -wsz:], valid[:, -wsz:])

    def forward(self, tokens, state=None, keep=None, enc=0, want_state=False):
        cfg = self.cfg
        x = self.w("transformer.embeddings.word_embeddings.weight")[tokens]
        new_state = []
        for i in range(cfg["n_layer"]):
            p = f"transformer.layers.{i}."
            st = None if state is None else state[i]
            hn = rms_norm(x, self.w(p + "norm1.weight"))
            if i in self.swa_layers:
                y, ns = self._swa(p, hn, st)
            elif i in self.la_layers:
                y, ns = self._la(p, hn, st, keep, enc, want_state)
            else:
                y, ns = self._conv(p, hn, st)
            new_state.append(ns)
            x = x + y
            u = rms_norm(x, self.w(p + "norm2.weight")) @ self.w(p + "mlp.fc1.weight").T
            a, gt = u.chunk(2, -1)
            x = x + (a * F.silu(gt)) @ self.w(p + "mlp.fc2.weight").T
        x = rms_norm(x, self.w("transformer.ln_f.weight"))
        return x @ self.w("transformer.embeddings.word_embeddings.weight").T, new_state


def detach_state(state, reset: Optional[torch.Tensor]):
    """Detach a state (nested tuples of tensors) and zero the rows of `reset`
    [B] bool (a window's valid mask becomes False)."""

    def one(t):
        if t is None:
            return None
        if isinstance(t, (tuple, list)):
            return tuple(one(u) for u in t)
        t = t.detach()
        if reset is None:
            return t
        shape = (-1,) + (1,) * (t.dim() - 1)
        keep = (~reset).view(shape)
        return t & keep if t.dtype == torch.bool else t * keep.to(t.dtype)

    return [one(s) for s in state]


# ---------------------------------------------------------------- Mamba-2


def segsum(a):
    q = a.shape[-1]
    cum = torch.cumsum(a, dim=-1)
    out = cum[..., :, None] - cum[..., None, :]
    mask = torch.tril(torch.ones(q, q, dtype=torch.bool))
    return out.masked_fill(~mask, float("-inf"))


def ssd_chunked(x, delta, a, b, c, d, s0, chunk):
    """Batched chunked SSD. x [B, T, H, P], delta [B, T, H], a [H],
    b / c [B, T, H, N], d [H], s0 [B, H, P, N]; T a multiple of chunk."""
    bs, t = x.shape[:2]
    nc = t // chunk
    xd = (x * delta[..., None]).reshape(bs, nc, chunk, *x.shape[2:])  # [b c l h p]
    ad = (delta * a).reshape(bs, nc, chunk, -1).permute(0, 1, 3, 2)  # [b c h l]
    bc = b.reshape(bs, nc, chunk, *b.shape[2:])
    cc = c.reshape(bs, nc, chunk, *c.shape[2:])
    a_cum = torch.cumsum(ad, dim=-1)
    decay = torch.exp(segsum(ad))  # [b c h l s]
    y_diag = torch.einsum("bclhn,bcshn,bchls,bcshp->bclhp", cc, bc, decay, xd)
    decay_states = torch.exp(a_cum[..., -1:] - a_cum)
    states = torch.einsum("bclhn,bchl,bclhp->bchpn", bc, decay_states, xd)
    entering = []
    h = s0
    for i in range(nc):
        entering.append(h)
        h = torch.exp(a_cum[:, i, :, -1])[:, :, None, None] * h + states[:, i]
    entering = torch.stack(entering, 1)  # [b c h p n]
    y_off = torch.einsum("bclhn,bchpn,bchl->bclhp", cc, entering, torch.exp(a_cum))
    y = (y_diag + y_off).reshape(bs, t, *x.shape[2:])
    return y + d[None, None, :, None] * x, h


class Mamba2LM(Named):
    def __init__(self, cfg: dict, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.cfg = cfg
        s = cfg["ssm_cfg"]
        d = cfg["d_model"]
        self.d = d
        self.e = s["expand"] * d
        self.n = s["d_state"]
        self.hp = s["headdim"]
        self.h = self.e // self.hp
        self.kc = s["d_conv"]
        self.chunk = s["chunk_size"]
        self.conv_dim = self.e + 2 * self.n
        m = cfg["pad_vocab_size_multiple"]
        self.vpad = (cfg["vocab_size"] + m - 1) // m * m
        L = cfg["n_layer"]
        self.add("backbone.embedding.weight", _normal((self.vpad, d), 0.02, g))
        self.add("backbone.norm_f.weight", torch.ones(d))
        for i in range(L):
            p = f"backbone.layers.{i}."
            self.add(p + "norm.weight", torch.ones(d))
            self.add(p + "mixer.in_proj.weight", _normal((2 * self.e + 2 * self.n + self.h, d), 0.02, g))
            self.add(p + "mixer.conv1d.weight", _normal((self.conv_dim, 1, self.kc), 0.2, g))
            self.add(p + "mixer.conv1d.bias", torch.zeros(self.conv_dim))
            # dt in [1e-3, 1e-1] log-uniform, as upstream initialises it.
            dt = torch.exp(torch.rand(self.h, generator=g) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.add(p + "mixer.dt_bias", dt + torch.log(-torch.expm1(-dt)))
            self.add(p + "mixer.A_log", torch.log(torch.rand(self.h, generator=g) * 15 + 1))
            self.add(p + "mixer.D", torch.ones(self.h))
            self.add(p + "mixer.norm.weight", torch.ones(self.e))
            self.add(p + "mixer.out_proj.weight", _normal((d, self.e), 0.02 / math.sqrt(2 * L), g))

    def _mixer(self, p, u, st):
        b, t, _ = u.shape
        e, n, h = self.e, self.n, self.h
        zxbcdt = u @ self.w(p + "mixer.in_proj.weight").T
        z, xbc, dt = zxbcdt[..., :e], zxbcdt[..., e:e + self.conv_dim], zxbcdt[..., e + self.conv_dim:]
        tail = st[0] if st is not None else u.new_zeros(b, self.kc - 1, self.conv_dim)
        ext = torch.cat([tail, xbc], 1)
        conv = F.conv1d(ext.transpose(1, 2), self.w(p + "mixer.conv1d.weight"), groups=self.conv_dim)
        xbc = F.silu(conv.transpose(1, 2) + self.w(p + "mixer.conv1d.bias"))
        x = xbc[..., :e].reshape(b, t, h, self.hp)
        bb = xbc[..., e:e + n][:, :, None, :].expand(b, t, h, n)
        cc = xbc[..., e + n:][:, :, None, :].expand(b, t, h, n)
        delta = F.softplus(dt + self.w(p + "mixer.dt_bias"), threshold=20.0)
        a = -torch.exp(self.w(p + "mixer.A_log"))
        s0 = st[1] if st is not None else u.new_zeros(b, h, self.hp, n)
        pad = (-t) % self.chunk
        if pad:
            x_, d_, b_, c_ = (F.pad(x, (0, 0, 0, 0, 0, pad)), F.pad(delta, (0, 0, 0, pad)),
                              F.pad(bb, (0, 0, 0, 0, 0, pad)), F.pad(cc, (0, 0, 0, 0, 0, pad)))
        else:
            x_, d_, b_, c_ = x, delta, bb, cc
        y, s1 = ssd_chunked(x_, d_, a, b_, c_, self.w(p + "mixer.D"), s0, self.chunk)
        y = y[:, :t]
        v = y.reshape(b, t, e) * F.silu(z)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w(p + "mixer.norm.weight")
        return v @ self.w(p + "mixer.out_proj.weight").T, (ext[:, -(self.kc - 1):], s1)

    def forward(self, tokens, state=None, keep=None, enc=0, want_state=False):
        x = self.w("backbone.embedding.weight")[tokens]
        new_state = []
        for i in range(self.cfg["n_layer"]):
            p = f"backbone.layers.{i}."
            y, ns = self._mixer(p, rms_norm(x, self.w(p + "norm.weight")), None if state is None else state[i])
            new_state.append(ns)
            x = x + y
        x = rms_norm(x, self.w("backbone.norm_f.weight"))
        return x @ self.w("backbone.embedding.weight").T, new_state


# ------------------------------------------------------------------ Llama


class LlamaLM(Named):
    def __init__(self, cfg: dict, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.cfg = cfg
        d = cfg["hidden_size"]
        self.h = cfg["num_attention_heads"]
        self.kvh = cfg["num_key_value_heads"]
        self.hd = d // self.h
        L = cfg["num_hidden_layers"]
        inter = cfg["intermediate_size"]
        out_std = 0.02 / math.sqrt(2 * L)
        self.add("model.embed_tokens.weight", _normal((cfg["vocab_size"], d), 0.02, g))
        self.add("model.norm.weight", torch.ones(d))
        for i in range(L):
            p = f"model.layers.{i}."
            self.add(p + "input_layernorm.weight", torch.ones(d))
            self.add(p + "post_attention_layernorm.weight", torch.ones(d))
            self.add(p + "self_attn.q_proj.weight", _normal((self.h * self.hd, d), 0.02, g))
            self.add(p + "self_attn.k_proj.weight", _normal((self.kvh * self.hd, d), 0.02, g))
            self.add(p + "self_attn.v_proj.weight", _normal((self.kvh * self.hd, d), 0.02, g))
            self.add(p + "self_attn.o_proj.weight", _normal((d, self.h * self.hd), out_std, g))
            self.add(p + "mlp.gate_proj.weight", _normal((inter, d), 0.02, g))
            self.add(p + "mlp.up_proj.weight", _normal((inter, d), 0.02, g))
            self.add(p + "mlp.down_proj.weight", _normal((d, inter), out_std, g))

    def forward(self, tokens, state=None, keep=None, enc=0, want_state=False):
        cfg = self.cfg
        eps = cfg["rms_norm_eps"]
        b, t = tokens.shape
        x = self.w("model.embed_tokens.weight")[tokens]
        pos = torch.arange(t)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            u = rms_norm(x, self.w(p + "input_layernorm.weight"), eps)
            q = rope((u @ self.w(p + "self_attn.q_proj.weight").T).view(b, t, self.h, self.hd), pos, cfg["rope_theta"])
            k = rope((u @ self.w(p + "self_attn.k_proj.weight").T).view(b, t, self.kvh, self.hd), pos, cfg["rope_theta"])
            v = (u @ self.w(p + "self_attn.v_proj.weight").T).view(b, t, self.kvh, self.hd)
            rep = self.h // self.kvh
            k = k.repeat_interleave(rep, 2)
            v = v.repeat_interleave(rep, 2)
            s = torch.einsum("bihe,bjhe->bhij", q, k) / math.sqrt(self.hd)
            s = s.masked_fill(~causal, float("-inf"))
            y = torch.einsum("bhij,bjhe->bihe", torch.softmax(s, -1), v).reshape(b, t, -1)
            x = x + y @ self.w(p + "self_attn.o_proj.weight").T
            u = rms_norm(x, self.w(p + "post_attention_layernorm.weight"), eps)
            gt = u @ self.w(p + "mlp.gate_proj.weight").T
            up = u @ self.w(p + "mlp.up_proj.weight").T
            x = x + (F.silu(gt) * up) @ self.w(p + "mlp.down_proj.weight").T
        x = rms_norm(x, self.w("model.norm.weight"), eps)
        return x @ self.w("model.embed_tokens.weight").T, None


# -------------------------------------------------------------- Nemotron-H


class NemotronHLM(Named):
    """transformers NemotronHForCausalLM names; one norm and one mixer per
    layer of hybrid_override_pattern (M Mamba-2, * attention, - MLP); the
    training form reads whole sequences (no carried state)."""

    def __init__(self, cfg: dict, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.cfg = cfg
        d = cfg["hidden_size"]
        self.d = d
        self.h = cfg["mamba_num_heads"]
        self.hp = cfg["mamba_head_dim"]
        self.e = self.h * self.hp
        self.g = cfg["n_groups"]
        self.n = cfg["ssm_state_size"]
        self.kc = cfg["conv_kernel"]
        self.chunk = cfg["chunk_size"]
        self.conv_dim = self.e + 2 * self.g * self.n
        self.ah = cfg["num_attention_heads"]
        self.kvh = cfg["num_key_value_heads"]
        self.hd = cfg["head_dim"]
        self.eps = cfg["layer_norm_epsilon"]
        pattern = cfg["hybrid_override_pattern"]
        out_std = 0.02 / math.sqrt(2 * len(pattern))
        self.add("backbone.embeddings.weight", _normal((cfg["vocab_size"], d), 0.02, g))
        self.add("backbone.norm_f.weight", torch.ones(d))
        for i, kind in enumerate(pattern):
            p = f"backbone.layers.{i}."
            m = p + "mixer."
            self.add(p + "norm.weight", torch.ones(d))
            if kind == "M":
                self.add(m + "in_proj.weight", _normal((self.e + self.conv_dim + self.h, d), 0.02, g))
                self.add(m + "conv1d.weight", _normal((self.conv_dim, 1, self.kc), 0.2, g))
                self.add(m + "conv1d.bias", torch.zeros(self.conv_dim))
                dt = torch.exp(torch.rand(self.h, generator=g) * (math.log(0.1) - math.log(1e-3))
                               + math.log(1e-3))
                self.add(m + "dt_bias", dt + torch.log(-torch.expm1(-dt)))
                self.add(m + "A_log", torch.log(torch.rand(self.h, generator=g) * 15 + 1))
                self.add(m + "D", torch.ones(self.h))
                self.add(m + "norm.weight", torch.ones(self.e))
                self.add(m + "out_proj.weight", _normal((d, self.e), out_std, g))
            elif kind == "*":
                self.add(m + "q_proj.weight", _normal((self.ah * self.hd, d), 0.02, g))
                self.add(m + "k_proj.weight", _normal((self.kvh * self.hd, d), 0.02, g))
                self.add(m + "v_proj.weight", _normal((self.kvh * self.hd, d), 0.02, g))
                self.add(m + "o_proj.weight", _normal((d, self.ah * self.hd), out_std, g))
            else:
                inter = cfg["intermediate_size"]
                self.add(m + "up_proj.weight", _normal((inter, d), 0.02, g))
                self.add(m + "down_proj.weight", _normal((d, inter), out_std, g))
        if not cfg.get("tie_word_embeddings", False):
            self.add("lm_head.weight", _normal((cfg["vocab_size"], d), 0.02, g))

    def _mamba(self, m, u):
        b, t, _ = u.shape
        e, n, h, grp = self.e, self.n, self.h, self.g
        zxbcdt = u @ self.w(m + "in_proj.weight").T
        z, xbc, dt = zxbcdt[..., :e], zxbcdt[..., e:e + self.conv_dim], zxbcdt[..., e + self.conv_dim:]
        ext = torch.cat([u.new_zeros(b, self.kc - 1, self.conv_dim), xbc], 1)
        conv = F.conv1d(ext.transpose(1, 2), self.w(m + "conv1d.weight"), groups=self.conv_dim)
        xbc = F.silu(conv.transpose(1, 2) + self.w(m + "conv1d.bias"))
        x = xbc[..., :e].reshape(b, t, h, self.hp)
        rep = h // grp
        bb = xbc[..., e:e + grp * n].reshape(b, t, grp, n).repeat_interleave(rep, 2)
        cc = xbc[..., e + grp * n:].reshape(b, t, grp, n).repeat_interleave(rep, 2)
        delta = F.softplus(dt + self.w(m + "dt_bias"), threshold=20.0)
        a = -torch.exp(self.w(m + "A_log"))
        pad = (-t) % self.chunk
        if pad:
            x, delta, bb, cc = (F.pad(x, (0, 0, 0, 0, 0, pad)), F.pad(delta, (0, 0, 0, pad)),
                                F.pad(bb, (0, 0, 0, 0, 0, pad)), F.pad(cc, (0, 0, 0, 0, 0, pad)))
        s0 = u.new_zeros(b, h, self.hp, n)
        y, _ = ssd_chunked(x, delta, a, bb, cc, self.w(m + "D"), s0, self.chunk)
        v = (y[:, :t].reshape(b, t, e) * F.silu(z)).reshape(b, t, grp, e // grp)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + self.eps)
        return (v.reshape(b, t, e) * self.w(m + "norm.weight")) @ self.w(m + "out_proj.weight").T

    def _attention(self, m, u):
        b, t, _ = u.shape
        q = (u @ self.w(m + "q_proj.weight").T).view(b, t, self.ah, self.hd)
        k = (u @ self.w(m + "k_proj.weight").T).view(b, t, self.kvh, self.hd)
        v = (u @ self.w(m + "v_proj.weight").T).view(b, t, self.kvh, self.hd)
        rep = self.ah // self.kvh
        k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
        s = torch.einsum("bihe,bjhe->bhij", q, k) / math.sqrt(self.hd)
        s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        y = torch.einsum("bhij,bjhe->bihe", torch.softmax(s, -1), v).reshape(b, t, -1)
        return y @ self.w(m + "o_proj.weight").T

    def forward(self, tokens, state=None, keep=None, enc=0, want_state=False):
        x = self.w("backbone.embeddings.weight")[tokens]
        for i, kind in enumerate(self.cfg["hybrid_override_pattern"]):
            p = f"backbone.layers.{i}."
            u = rms_norm(x, self.w(p + "norm.weight"), self.eps)
            if kind == "M":
                x = x + self._mamba(p + "mixer.", u)
            elif kind == "*":
                x = x + self._attention(p + "mixer.", u)
            else:
                up = torch.relu(u @ self.w(p + "mixer.up_proj.weight").T)
                x = x + up.pow(2) @ self.w(p + "mixer.down_proj.weight").T
        x = rms_norm(x, self.w("backbone.norm_f.weight"), self.eps)
        head = "lm_head.weight" if "lm_head.weight" in self.names else "backbone.embeddings.weight"
        return x @ self.w(head).T, None
