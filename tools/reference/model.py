"""A float64 reference of the Based and JRT-RNN language models.

Reads the HuggingFace-layout directory the engine reads (config.json,
model.safetensors or a sharded index, tokenizer.json) with upstream's name
rules, and runs it in two independent forms:

  prefill            parallel form: each layer over all tokens at once
  prefill_recurrent  recurrent form: each layer token by token (JRT's
                     encoder sums are added to the state first)
  step               one token, recurrent form

Block (pre-norm, residual in float64):
  x = E[tokens]; per layer: x += Mixer(RMSNorm1(x)); x += MLP(RMSNorm2(x))
  logits = RMSNorm_f(x) E^T          (tied head; [T, padded vocab])

JRT-RNN prefix mode (mode="prefix", from an empty state): the encoder of
every prefix-linear-attention layer sums over the first M' = min(M, N)
tokens and every output sees it; tokens whose `keep` is False (left pads)
have their raw keys zeroed in those layers, so phi(k) = (1, 0, ..., 0).
`prefix_inputs` builds the padded / read-twice token sequence and that mask.
Afterwards decoding is plain Based recurrence on the merged state.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import List, Optional, Sequence, Tuple

import torch

from reference import layers
from reference.config import (
    CONV,
    JRT_PAD_TOKEN_ID,
    LINEAR_ATTENTION,
    ModelConfig,
    parse_config,
)
from reference.safetensors_io import read_safetensors

EMBEDDING = "transformer.embeddings.word_embeddings.weight"
LM_HEAD = "lm_head.weight"


def canonical_name(stored: str) -> Optional[str]:
    """Upstream's checkpoint rules: None for training metrics; drop a leading
    Lightning "model." prefix; legacy "conv1" is "conv"."""
    if "metrics" in stored:
        return None
    if stored.startswith("model."):
        stored = stored[len("model.") :]
    return stored.replace("conv1", "conv")


def read_weights(path: str) -> dict:
    """All tensors of model.safetensors (or its sharded index) by canonical
    name, as float64."""
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        tensors, _ = read_safetensors(os.path.join(path, name))
        for stored, t in tensors.items():
            canon = canonical_name(stored)
            if canon is not None:
                weights[canon] = t.to(torch.float64)
    return weights


def tokenizer_vocab_size(tokenizer_json: str) -> int:
    """Ids a tokenizer.json can produce: 1 + the largest id it names."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
    ids += [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def prefix_inputs(
    doc: Sequence[int],
    enc_length: int,
    pad: bool = True,
    read_twice: bool = False,
    pad_token_id: int = JRT_PAD_TOKEN_ID,
) -> Tuple[List[int], Optional[List[bool]]]:
    """The tokens a JRT prefix prefill reads for `doc`, and its key mask.

    read_twice: the document twice (JRT-Prompt's Read-2x). pad: a sequence
    shorter than the encoder region is left-padded with the pad token to
    exactly enc_length, and the pads are masked (keep False); longer ones are
    not touched and have no mask."""
    tokens = list(doc) * 2 if read_twice else list(doc)
    if pad and len(tokens) < enc_length:
        n = enc_length - len(tokens)
        return [pad_token_id] * n + tokens, [False] * n + [True] * len(tokens)
    return tokens, None


@dataclasses.dataclass
class SequenceState:
    layers: list
    token_count: int = 0

    def clone(self) -> "SequenceState":
        return copy.deepcopy(self)


class ReferenceModel:
    def __init__(self, cfg: ModelConfig, weights: dict, vocab_size: int):
        self.cfg = cfg
        self.vocab_size = vocab_size  # tokenizer ids; logits are padded wider
        emb = weights.get(EMBEDDING, weights.get(LM_HEAD))
        assert emb.shape == (cfg.padded_vocab_size, cfg.d), emb.shape
        self.embedding = emb
        self.head = emb if cfg.tie_word_embeddings else weights[LM_HEAD]
        self.final_norm = weights["transformer.ln_f.weight"]
        self.blocks = []
        for i in range(cfg.num_layers):
            p = f"transformer.layers.{i}."
            kind = cfg.mixer(i)
            if kind == CONV:
                mixer = layers.BaseConv(weights, p, cfg.conv_kernel_size)
            elif kind == LINEAR_ATTENTION:
                mixer = layers.LinearAttention(
                    weights,
                    p,
                    cfg.linear_attention_heads,
                    cfg.linear_attention_eps,
                    prefix=cfg.architecture == "jrt",
                )
            else:
                mixer = layers.SlidingWindowAttention(
                    weights, p, cfg.num_heads, cfg.window_left, cfg.rotary_base
                )
            fc1 = weights[p + "mlp.fc1.weight"]
            assert fc1.shape == (2 * cfg.mlp_hidden, cfg.d), fc1.shape
            self.blocks.append(
                (
                    weights[p + "norm1.weight"],
                    mixer,
                    weights[p + "norm2.weight"],
                    fc1,
                    weights[p + "mlp.fc2.weight"],
                )
            )

    @classmethod
    def from_dir(cls, path: str) -> "ReferenceModel":
        with open(os.path.join(path, "config.json")) as f:
            cfg = parse_config(f.read())
        vocab = tokenizer_vocab_size(os.path.join(path, "tokenizer.json"))
        return cls(cfg, read_weights(path), vocab)

    def new_state(self) -> SequenceState:
        return SequenceState([b[1].new_state() for b in self.blocks])

    def _check(self, tokens, state, mode, keep):
        assert len(tokens) >= 1
        assert all(0 <= t < self.vocab_size for t in tokens), tokens
        assert mode in ("causal", "prefix"), mode
        if mode == "prefix":
            assert self.cfg.architecture == "jrt", "prefix mode needs a JRT model"
            assert state.token_count == 0, "prefix mode starts from an empty state"
        else:
            assert keep is None, "only prefix mode masks keys"
        return None if keep is None else torch.tensor(keep, dtype=torch.bool)

    def _run(self, tokens, state, mode, keep, recurrent: bool) -> torch.Tensor:
        keep_t = self._check(tokens, state, mode, keep)
        enc = self.cfg.enc_length if mode == "prefix" else 0
        start = state.token_count
        x = self.embedding[torch.tensor(tokens)]
        for (n1, mixer, n2, fc1, fc2), st in zip(self.blocks, state.layers):
            h = layers.rms_norm(x, n1, self.cfg.norm_eps)
            prefix_la = enc > 0 and isinstance(mixer, layers.LinearAttention)
            if not recurrent:
                x = x + mixer.forward(
                    h, st, start, keep=keep_t if prefix_la else None, enc=enc
                )
            else:
                if prefix_la:
                    mixer.encode_prefix(h, st, keep_t, enc)
                rows = []
                for i in range(len(tokens)):
                    k = None if keep_t is None or not prefix_la else bool(keep_t[i])
                    rows.append(mixer.step(h[i], st, start + i, keep=k))
                x = x + torch.stack(rows)
            x = x + layers.swiglu_mlp(layers.rms_norm(x, n2, self.cfg.norm_eps), fc1, fc2)
        state.token_count = start + len(tokens)
        return layers.rms_norm(x, self.final_norm, self.cfg.norm_eps) @ self.head.T

    def prefill(self, tokens, state, mode="causal", keep=None) -> torch.Tensor:
        """Parallel form. Logits of every position [T, padded vocab]."""
        return self._run(list(tokens), state, mode, keep, recurrent=False)

    def prefill_recurrent(self, tokens, state, mode="causal", keep=None):
        """Recurrent form of `prefill`; the same function."""
        return self._run(list(tokens), state, mode, keep, recurrent=True)

    def step(self, token: int, state: SequenceState) -> torch.Tensor:
        return self._run([token], state, "causal", None, recurrent=True)[0]

    def argmax(self, logits: torch.Tensor) -> int:
        """Greedy choice among real tokens (padding rows are never chosen)."""
        return int(torch.argmax(logits[: self.vocab_size]))
