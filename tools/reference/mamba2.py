"""A float64 reference of the Mamba-2 language model (Dao & Gu 2024,
"Transformers are SSMs"), written from the paper's equations and the
facts of ../shared reference §1, not from upstream code.

Reads the model directory the engine reads (config.json, model.safetensors,
tokenizer.json; upstream `state-spaces/mamba2-*` or transformers names) and
runs each mixer in two independent forms:

  prefill            chunked SSD form (quadratic intra-chunk term, chunk
                     states, state passing, state -> output), starting
                     from the carried state
  prefill_recurrent  the recurrence, token by token
  step               one token, recurrent form

Block (pre-norm, residual in float64):
  x = E[tokens]; per layer: x += Mixer(RMSNorm(x))
  logits = RMSNorm_f(x) E^T          (tied head; [T, padded vocab])

Mixer, per token u [D]:
  z | xBC | dt_raw = W_in u
  xBC' = SiLU(conv_bias + depthwise causal conv_K over the raw xBC rows)
  x [H, P] | B [G, N] | C [G, N] = xBC';  head h reads group h // (H / G)
  delta = softplus(dt_raw + dt_bias) (identity above 20); A = -exp(A_log)
  S_h = exp(delta_h A_h) S_h + delta_h x_h (x) B_g;  y_h = S_h C_g + D_h x_h
  v = y * SiLU(z); per group of E / G channels v /= rms(v) (eps 1e-5); v *= w
  out = W_out v
State per layer: conv_tail [K-1, conv_dim] (last raw xBC rows) and
ssm [H, P, N].
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import List, Sequence

import torch
import torch.nn.functional as F

from reference.safetensors_io import read_safetensors

SOFTPLUS_THRESHOLD = 20.0
GATED_NORM_EPS = 1e-5


@dataclasses.dataclass
class Mamba2Config:
    d_model: int
    n_layer: int
    vocab_size: int
    pad_vocab_size_multiple: int = 16
    d_state: int = 128
    d_conv: int = 4
    expand: int = 2
    headdim: int = 64
    ngroups: int = 1
    chunk_size: int = 256
    norm_eps: float = 1e-5

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def nheads(self) -> int:
        return self.d_inner // self.headdim

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.ngroups * self.d_state

    @property
    def d_in_proj(self) -> int:
        return 2 * self.d_inner + 2 * self.ngroups * self.d_state + self.nheads

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_size_multiple
        return (self.vocab_size + m - 1) // m * m


def parse_config(text: str) -> Mamba2Config:
    """Upstream keys (mixer keys at the top level or in ssm_cfg) or the
    transformers aliases, with the engine's defaults."""
    j = json.loads(text)
    ssm = j.get("ssm_cfg") or {}

    def get(keys, default):
        for obj in (j, ssm):
            for k in keys:
                if obj.get(k) is not None:
                    return obj[k]
        return default

    return Mamba2Config(
        d_model=get(["d_model", "hidden_size"], None),
        n_layer=get(["n_layer", "num_hidden_layers"], None),
        vocab_size=j["vocab_size"],
        pad_vocab_size_multiple=j.get("pad_vocab_size_multiple", 16),
        d_state=get(["d_state", "state_size"], 128),
        d_conv=get(["d_conv", "conv_kernel"], 4),
        expand=get(["expand"], 2),
        headdim=get(["headdim", "head_dim"], 64),
        ngroups=get(["ngroups", "n_groups"], 1),
        chunk_size=get(["chunk_size"], 256),
        norm_eps=get(["norm_epsilon", "layer_norm_epsilon"], 1e-5),
    )


def expected_shapes(c: Mamba2Config) -> dict:
    """Every tensor by upstream name with its shape."""
    v, d, e, h = c.padded_vocab_size, c.d_model, c.d_inner, c.nheads
    shapes = {"backbone.embedding.weight": [v, d], "backbone.norm_f.weight": [d]}
    for i in range(c.n_layer):
        p = f"backbone.layers.{i}."
        shapes.update({
            p + "norm.weight": [d],
            p + "mixer.in_proj.weight": [c.d_in_proj, d],
            p + "mixer.conv1d.weight": [c.conv_dim, 1, c.d_conv],
            p + "mixer.conv1d.bias": [c.conv_dim],
            p + "mixer.dt_bias": [h],
            p + "mixer.A_log": [h],
            p + "mixer.D": [h],
            p + "mixer.norm.weight": [e],
            p + "mixer.out_proj.weight": [d, e],
        })
    return shapes


def canonical_name(stored: str) -> str:
    """The engine's rule: drop "model.", put everything but lm_head under
    "backbone.", transformers' "embeddings." is "embedding."."""
    if stored.startswith("model."):
        stored = stored[len("model."):]
    if not stored.startswith("backbone.") and not stored.startswith("lm_head."):
        stored = "backbone." + stored
    if stored.startswith("backbone.embeddings."):
        stored = "backbone.embedding." + stored[len("backbone.embeddings."):]
    return stored


def softplus(v: torch.Tensor) -> torch.Tensor:
    return torch.where(v > SOFTPLUS_THRESHOLD, v, torch.log1p(torch.exp(v)))


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@dataclasses.dataclass
class LayerState:
    conv_tail: torch.Tensor  # [K-1, conv_dim]
    ssm: torch.Tensor  # [H, P, N]


@dataclasses.dataclass
class SequenceState:
    layers: List[LayerState]
    token_count: int = 0

    def clone(self) -> "SequenceState":
        return copy.deepcopy(self)


def segsum(a: torch.Tensor) -> torch.Tensor:
    """[..., Q] -> [..., Q, Q]: out[l, s] = sum_{s < r <= l} a_r for s <= l,
    -inf above the diagonal (exp of it is the causal decay matrix)."""
    q = a.shape[-1]
    cum = torch.cumsum(a, dim=-1)
    out = cum[..., :, None] - cum[..., None, :]
    mask = torch.tril(torch.ones(q, q, dtype=torch.bool))
    return out.masked_fill(~mask, float("-inf"))


def ssd_chunked(x, delta, a, b, c, d, s0, chunk):
    """Chunked SSD. x [T, H, P], delta [T, H], a [H], b / c [T, H, N] (groups
    expanded to heads), d [H], s0 [H, P, N]. Returns y [T, H, P] and the
    final state. A ragged tail is padded with delta = 0 (decay 1, no input),
    which changes neither real outputs nor the state."""
    t = x.shape[0]
    pad = (-t) % chunk
    if pad:
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
        delta = F.pad(delta, (0, 0, 0, pad))
        b = F.pad(b, (0, 0, 0, 0, 0, pad))
        c = F.pad(c, (0, 0, 0, 0, 0, pad))
    n_chunks = x.shape[0] // chunk
    xd = (x * delta[..., None]).reshape(n_chunks, chunk, *x.shape[1:])  # [c, l, h, p]
    ad = (delta * a).reshape(n_chunks, chunk, -1).permute(0, 2, 1)  # [c, h, l]
    bc = b.reshape(n_chunks, chunk, *b.shape[1:])  # [c, l, h, n]
    cc = c.reshape(n_chunks, chunk, *c.shape[1:])
    a_cum = torch.cumsum(ad, dim=-1)  # [c, h, l]
    # 1. intra-chunk (diagonal blocks)
    decay = torch.exp(segsum(ad))  # [c, h, l, s]
    y_diag = torch.einsum("clhn,cshn,chls,cshp->clhp", cc, bc, decay, xd)
    # 2. state of each chunk from its own inputs
    decay_states = torch.exp(a_cum[..., -1:] - a_cum)  # [c, h, l]
    states = torch.einsum("clhn,chl,clhp->chpn", bc, decay_states, xd)
    # 3. state passing between chunks, from s0
    entering = []
    h = s0
    for i in range(n_chunks):
        entering.append(h)
        h = torch.exp(a_cum[i, :, -1])[:, None, None] * h + states[i]
    entering = torch.stack(entering)  # [c, h, p, n]
    # 4. entering state -> outputs
    y_off = torch.einsum("clhn,chpn,chl->clhp", cc, entering, torch.exp(a_cum))
    y = (y_diag + y_off).reshape(-1, *x.shape[1:])[:t]
    return y + d[None, :, None] * x[:t], h


def ssd_step(x, delta, a, b, c, d, s):
    """One token. x [H, P], delta [H], b / c [H, N]; returns y [H, P] and S."""
    s = torch.exp(delta * a)[:, None, None] * s + (delta[:, None] * x)[..., None] * b[:, None, :]
    y = torch.einsum("hpn,hn->hp", s, c) + d[:, None] * x
    return y, s


class Mixer:
    def __init__(self, cfg: Mamba2Config, w: dict, prefix: str):
        p = prefix + "mixer."
        self.cfg = cfg
        self.w_in = w[p + "in_proj.weight"]
        self.conv_w = w[p + "conv1d.weight"][:, 0, :]  # [conv_dim, K]
        self.conv_b = w[p + "conv1d.bias"]
        self.dt_bias = w[p + "dt_bias"]
        self.a = -torch.exp(w[p + "A_log"])
        self.d = w[p + "D"]
        self.norm_w = w[p + "norm.weight"]
        self.w_out = w[p + "out_proj.weight"]

    def new_state(self) -> LayerState:
        c = self.cfg
        return LayerState(
            torch.zeros(c.d_conv - 1, c.conv_dim, dtype=torch.float64),
            torch.zeros(c.nheads, c.headdim, c.d_state, dtype=torch.float64),
        )

    def _split(self, u: torch.Tensor, st: LayerState):
        """Projection, conv (carrying the tail), discretisation over T rows."""
        c = self.cfg
        e, k = c.d_inner, c.d_conv
        zxbcdt = u @ self.w_in.T
        z, xbc, dt_raw = zxbcdt[:, :e], zxbcdt[:, e:e + c.conv_dim], zxbcdt[:, e + c.conv_dim:]
        full = torch.cat([st.conv_tail, xbc], dim=0)  # [K-1+T, conv_dim]
        t = xbc.shape[0]
        conv = torch.stack([(full[i:i + k] * self.conv_w.T).sum(0) for i in range(t)])
        st.conv_tail = full[-(k - 1):].clone() if k > 1 else full[:0].clone()
        xbc = F.silu(conv + self.conv_b)
        gn = c.ngroups * c.d_state
        x = xbc[:, :e].reshape(t, c.nheads, c.headdim)
        rep = c.nheads // c.ngroups
        b = xbc[:, e:e + gn].reshape(t, c.ngroups, c.d_state).repeat_interleave(rep, dim=1)
        cc = xbc[:, e + gn:].reshape(t, c.ngroups, c.d_state).repeat_interleave(rep, dim=1)
        delta = softplus(dt_raw + self.dt_bias)
        return z, x, b, cc, delta

    def _out(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        t = y.shape[0]
        v = y.reshape(t, c.d_inner) * F.silu(z)
        g = v.reshape(t, c.ngroups, c.d_inner // c.ngroups)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + GATED_NORM_EPS)
        return (g.reshape(t, c.d_inner) * self.norm_w) @ self.w_out.T

    def chunked(self, u: torch.Tensor, st: LayerState) -> torch.Tensor:
        z, x, b, cc, delta = self._split(u, st)
        y, st.ssm = ssd_chunked(x, delta, self.a, b, cc, self.d, st.ssm, self.cfg.chunk_size)
        return self._out(z, y)

    def recurrent(self, u: torch.Tensor, st: LayerState) -> torch.Tensor:
        z, x, b, cc, delta = self._split(u, st)
        ys = []
        for i in range(u.shape[0]):
            y, st.ssm = ssd_step(x[i], delta[i], self.a, b[i], cc[i], self.d, st.ssm)
            ys.append(y)
        return self._out(z, torch.stack(ys))


class Mamba2Reference:
    def __init__(self, cfg: Mamba2Config, w: dict, vocab_size: int):
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.embedding = w["backbone.embedding.weight"]
        self.norm_f = w["backbone.norm_f.weight"]
        self.norms = [w[f"backbone.layers.{i}.norm.weight"] for i in range(cfg.n_layer)]
        self.mixers = [Mixer(cfg, w, f"backbone.layers.{i}.") for i in range(cfg.n_layer)]

    @staticmethod
    def from_dir(path: str) -> "Mamba2Reference":
        with open(os.path.join(path, "config.json")) as f:
            cfg = parse_config(f.read())
        stored, _ = read_safetensors(os.path.join(path, "model.safetensors"))
        w = {canonical_name(k): v.to(torch.float64) for k, v in stored.items()}
        if "backbone.embedding.weight" not in w:
            w["backbone.embedding.weight"] = w["lm_head.weight"]
        for name, shape in expected_shapes(cfg).items():
            if list(w[name].shape) != shape:
                raise ValueError(f"{name}: shape {list(w[name].shape)}, expected {shape}")
        with open(os.path.join(path, "tokenizer.json")) as f:
            vocab = len(json.load(f)["model"]["vocab"])
        return Mamba2Reference(cfg, w, vocab)

    def new_state(self) -> SequenceState:
        return SequenceState([m.new_state() for m in self.mixers])

    def _run(self, tokens: Sequence[int], state: SequenceState, form: str) -> torch.Tensor:
        x = self.embedding[torch.tensor(list(tokens), dtype=torch.long)]
        for norm, mixer, st in zip(self.norms, self.mixers, state.layers):
            u = rms_norm(x, norm, self.cfg.norm_eps)
            x = x + (mixer.chunked(u, st) if form == "chunked" else mixer.recurrent(u, st))
        state.token_count += len(tokens)
        return rms_norm(x, self.norm_f, self.cfg.norm_eps) @ self.embedding.T

    def prefill(self, tokens: Sequence[int], state: SequenceState) -> torch.Tensor:
        """Chunked SSD form; logits of every position [T, V_pad]."""
        return self._run(tokens, state, "chunked")

    def prefill_recurrent(self, tokens: Sequence[int], state: SequenceState) -> torch.Tensor:
        return self._run(tokens, state, "recurrent")

    def step(self, token: int, state: SequenceState) -> torch.Tensor:
        return self._run([token], state, "recurrent")[0]

    def argmax(self, logits: torch.Tensor) -> int:
        return int(torch.argmax(logits[: self.vocab_size]))
