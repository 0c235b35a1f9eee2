"""Float64 reference of an IBM Granite-4.0-H hybrid (transformers
`GraniteMoeHybridForCausalLM`, model_type "granitemoehybrid"), dense or with
experts, written from the hybrid-model fact sheet (§1, §3), in two forms:
`prefill` (chunked SSD, masked attention over all tokens) and `step` (the
SSM recurrence, attention over the cache).

  h = E[tokens] * embedding_multiplier
  per layer i (layer_types[i] = "mamba" | "attention"):
    h += residual_multiplier * Mixer_i(RMSNorm(h; input_layernorm))
      mamba: Mamba-2, d_inner = mamba_expand * d = mamba_n_heads *
             mamba_d_head, G groups (contiguous), gated RMSNorm (gate
             before norm) per group with rms_norm_eps
      attention: GQA, NO positional encoding, softmax scale
             attention_multiplier (not 1/sqrt(hd))
    x = RMSNorm(h; post_attention_layernorm)
    h += residual_multiplier * (shared_mlp(x) [+ moe(x) with experts])
      shared_mlp: u = input_linear x (gate = first half), out =
             output_linear(silu(gate) * up)
      moe (num_local_experts E > 0): router logits r = router x [E]; the
             num_experts_per_tok largest (the raw logits, no bias), gates =
             softmax over those k only; out = sum over the k of gate_e *
             expert_e(x), each expert a shared_mlp of width intermediate_size
             (input_linear [E, 2I, d], output_linear [E, d, I])
  logits = RMSNorm(h; model.norm) lm_head^T / logits_scaling (tied default)
State per layer: mamba conv tail + SSM; attention keys and values of every
token.
"""

from __future__ import annotations

import dataclasses
from typing import List, Sequence

import torch
import torch.nn.functional as F

from reference.layers import rms_norm
from reference.nemotron_h import (HybridState, KvState, MambaDims, gqa_attention,
                                  mamba2_layer, new_mamba_state, read_checked_dir)


@dataclasses.dataclass
class GraniteHybridConfig:
    d: int
    attention: List[bool]  # per layer
    mamba: MambaDims
    heads: int
    kv_heads: int
    inter: int
    eps: float
    embedding_multiplier: float
    residual_multiplier: float
    attention_multiplier: float
    logits_scaling: float
    vocab: int
    tied: bool
    experts: int = 0  # num_local_experts; 0: dense
    top_k: int = 0  # num_experts_per_tok
    expert_inter: int = 0  # intermediate_size

    @property
    def head_dim(self) -> int:
        return self.d // self.heads


def parse(cfg: dict) -> GraniteHybridConfig:
    d, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    eps = cfg.get("rms_norm_eps", 1e-6)
    mamba = MambaDims(cfg["mamba_n_heads"], cfg["mamba_d_head"], cfg.get("mamba_n_groups", 1),
                      cfg.get("mamba_d_state", 128), cfg.get("mamba_d_conv", 4),
                      cfg.get("mamba_chunk_size", 256), eps)
    assert mamba.d_inner == cfg.get("mamba_expand", 2) * d
    return GraniteHybridConfig(
        d=d, attention=[t == "attention" for t in cfg["layer_types"]], mamba=mamba,
        heads=heads, kv_heads=cfg.get("num_key_value_heads", heads),
        inter=cfg["shared_intermediate_size"], eps=eps,
        embedding_multiplier=cfg.get("embedding_multiplier", 1.0),
        residual_multiplier=cfg.get("residual_multiplier", 1.0),
        attention_multiplier=cfg.get("attention_multiplier", (d // heads) ** -0.5),
        logits_scaling=cfg.get("logits_scaling", 1.0),
        vocab=cfg["vocab_size"], tied=cfg.get("tie_word_embeddings", True),
        experts=cfg.get("num_local_experts", 0),
        top_k=cfg.get("num_experts_per_tok", 0) if cfg.get("num_local_experts", 0) else 0,
        expert_inter=cfg["intermediate_size"] if cfg.get("num_local_experts", 0) else 0)


def shapes(c: GraniteHybridConfig) -> dict:
    """Every tensor by its published name, with its shape."""
    out = {"model.embed_tokens.weight": (c.vocab, c.d), "model.norm.weight": (c.d,)}
    if not c.tied:
        out["lm_head.weight"] = (c.vocab, c.d)
    m = c.mamba
    for i, attention in enumerate(c.attention):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = (c.d,)
        out[p + "post_attention_layernorm.weight"] = (c.d,)
        if attention:
            q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
            out.update({p + "self_attn.q_proj.weight": (q, c.d),
                        p + "self_attn.k_proj.weight": (kv, c.d),
                        p + "self_attn.v_proj.weight": (kv, c.d),
                        p + "self_attn.o_proj.weight": (c.d, q)})
        else:
            a = p + "mamba."
            out.update({
                a + "in_proj.weight": (m.d_inner + m.conv_dim + m.heads, c.d),
                a + "conv1d.weight": (m.conv_dim, 1, m.d_conv),
                a + "conv1d.bias": (m.conv_dim,),
                a + "dt_bias": (m.heads,), a + "A_log": (m.heads,), a + "D": (m.heads,),
                a + "norm.weight": (m.d_inner,),
                a + "out_proj.weight": (c.d, m.d_inner),
            })
        out[p + "shared_mlp.input_linear.weight"] = (2 * c.inter, c.d)
        out[p + "shared_mlp.output_linear.weight"] = (c.d, c.inter)
        if c.experts:
            e = p + "block_sparse_moe."
            out[e + "router.layer.weight"] = (c.experts, c.d)
            out[e + "input_linear.weight"] = (c.experts, 2 * c.expert_inter, c.d)
            out[e + "output_linear.weight"] = (c.experts, c.d, c.expert_inter)
    return out


class GraniteHybridReference:
    def __init__(self, cfg: GraniteHybridConfig, w: dict):
        self.cfg = cfg
        self.w = {k: v.to(torch.float64) for k, v in w.items()}
        self.vocab_size = cfg.vocab
        # The smallest gap seen between the k-th and the (k+1)-th router
        # logit: where it is tiny, float32 may route differently.
        self.min_router_gap = float("inf")

    @staticmethod
    def from_dir(path: str) -> "GraniteHybridReference":
        return GraniteHybridReference(*read_checked_dir(path, parse, shapes))

    def new_state(self) -> HybridState:
        c = self.cfg
        layers = []
        for attention in c.attention:
            if attention:
                z = torch.zeros(0, c.kv_heads, c.head_dim, dtype=torch.float64)
                layers.append(KvState(z.clone(), z.clone()))
            else:
                layers.append(new_mamba_state(c.mamba))
        return HybridState(layers)

    def _attention(self, x, m: str, st: KvState, start: int):
        c = self.cfg
        return gqa_attention(self.w, m, c.heads, c.kv_heads, c.head_dim,
                             c.attention_multiplier, x, st, start)

    def _mlp(self, x, m: str):
        w, i = self.w, self.cfg.inter
        u = x @ w[m + "input_linear.weight"].T
        return (F.silu(u[:, :i]) * u[:, i:]) @ w[m + "output_linear.weight"].T

    def _moe(self, x, m: str):
        c, w = self.cfg, self.w
        logits = x @ w[m + "router.layer.weight"].T  # [T, E]
        ranked, index = torch.sort(logits, dim=1, descending=True, stable=True)
        if c.top_k < c.experts:
            gap = (ranked[:, c.top_k - 1] - ranked[:, c.top_k]).min().item()
            self.min_router_gap = min(self.min_router_gap, gap)
        gates = torch.softmax(ranked[:, :c.top_k], dim=1)
        w_in, w_out, i = w[m + "input_linear.weight"], w[m + "output_linear.weight"], c.expert_inter
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            for j in range(c.top_k):
                e = int(index[t, j])
                u = w_in[e] @ x[t]
                out[t] += gates[t, j] * (w_out[e] @ (F.silu(u[:i]) * u[i:]))
        return out

    def _forward(self, tokens: Sequence[int], state: HybridState, recurrent: bool):
        c, w = self.cfg, self.w
        h = w["model.embed_tokens.weight"][torch.tensor(list(tokens), dtype=torch.long)]
        h = h * c.embedding_multiplier
        start = state.token_count
        r = c.residual_multiplier
        for i, attention in enumerate(c.attention):
            p = f"model.layers.{i}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], c.eps)
            if attention:
                y = self._attention(x, p + "self_attn.", state.layers[i], start)
            else:
                y = mamba2_layer(w, p + "mamba.", c.mamba, x, state.layers[i], recurrent)
            h = h + r * y
            x = rms_norm(h, w[p + "post_attention_layernorm.weight"], c.eps)
            f = self._mlp(x, p + "shared_mlp.")
            if c.experts:
                f = f + self._moe(x, p + "block_sparse_moe.")
            h = h + r * f
        state.token_count += len(tokens)
        head = w["model.embed_tokens.weight"] if c.tied else w["lm_head.weight"]
        return rms_norm(h, w["model.norm.weight"], c.eps) @ head.T / c.logits_scaling

    def prefill(self, tokens: List[int], state: HybridState) -> torch.Tensor:
        """Logits of every position [T, V]: chunked SSD, masked attention."""
        return self._forward(tokens, state, False)

    def step(self, token: int, state: HybridState) -> torch.Tensor:
        """Logits [V] of one token: the SSM recurrence."""
        return self._forward([token], state, True)[0]

    def state_tensors(self, state: HybridState) -> List[torch.Tensor]:
        out = []
        for s in state.layers:
            if isinstance(s, KvState):
                out += [s.keys, s.values]
            else:
                out += [s.conv_tail, s.ssm]
        return out
