"""The hyper-parameters of a Based or JRT-RNN model, read from config.json.

The public checkpoints ship GPT-2 style configs (transformers.GPT2Config
dumps), so the GPT-2 aliases are accepted: n_embd / hidden_size, n_layer /
num_hidden_layers, n_head / num_attention_heads. Mixer dispatch follows
upstream: a layer in `alt_mixer_2_layers` is sliding-window attention, else
one in `alt_mixer_layers` is linear attention (prefix linear attention for
JRT), else BaseConv.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Tuple

CONV, LINEAR_ATTENTION, SLIDING_WINDOW = "conv", "linear_attention", "sliding_window"

# JRT-RNN pads a prompt shorter than the encoder region with this token id
# (GPT-2's space), as upstream inference does; config key prefix_pad_token_id.
JRT_PAD_TOKEN_ID = 220


def _first(obj: dict, *keys, default=None):
    for k in keys:
        if obj.get(k) is not None:
            return obj[k]
    return default


@dataclasses.dataclass
class ModelConfig:
    architecture: str  # "based" or "jrt"
    d: int
    num_layers: int
    num_heads: int  # sliding-window heads (n_head)
    n_inner: int
    vocab_size: int
    pad_vocab_size_multiple: int = 8
    norm_eps: float = 1e-5
    rotary_base: float = 10000.0
    feature_dim: int = 16  # linear attention F
    linear_attention_heads: int = 0
    linear_attention_eps: float = 1e-12
    window_size: int = 0  # as configured; a query sees window_size // 2 keys back
    conv_expand_proj: int = 4
    conv_kernel_size: int = 3  # upstream ignores the config key
    linear_attention_layers: List[int] = dataclasses.field(default_factory=list)
    sliding_window_layers: List[int] = dataclasses.field(default_factory=list)
    enc_length: int = 0  # JRT encoder region M (0 for Based)
    pad_token_id: int = JRT_PAD_TOKEN_ID  # JRT left-pad token
    tie_word_embeddings: bool = True

    @property
    def padded_vocab_size(self) -> int:
        m = self.pad_vocab_size_multiple
        return (self.vocab_size + m - 1) // m * m

    @property
    def mlp_hidden(self) -> int:
        """Upstream GatedMlp rounds n_inner up to a multiple of 256."""
        return (self.n_inner + 255) // 256 * 256

    @property
    def conv_inner(self) -> int:
        return self.conv_expand_proj * self.d // 2

    @property
    def window_left(self) -> int:
        return self.window_size // 2

    def mixer(self, layer: int) -> str:
        if layer in self.sliding_window_layers:
            return SLIDING_WINDOW
        if layer in self.linear_attention_layers:
            return LINEAR_ATTENTION
        return CONV


def _names_prefix_attention(root: dict) -> bool:
    """Whether alt_mixer's hydra _target_ is upstream's JRT mixer class."""
    target = (root.get("alt_mixer") or {}).get("_target_", "")
    return isinstance(target, str) and target.endswith("PrefixLinearAttention")


def _architecture(root: dict) -> str:
    pla = _names_prefix_attention(root)
    if "architecture" in root:
        return root["architecture"]
    t = root.get("model_type")
    if t is None or (t == "gpt2" and "alt_mixer" in root):
        # No key, or an upstream GPT2Config dump: the mixer class decides.
        return "jrt" if pla else "based"
    return t


def parse_config(text: str) -> ModelConfig:
    root = json.loads(text)
    arch = _architecture(root)
    if arch not in ("based", "jrt"):
        raise ValueError(f"config.json: architecture {arch!r} is not based or jrt")
    d = _first(root, "n_embd", "hidden_size")
    heads = _first(root, "n_head", "num_attention_heads")
    alt = root.get("alt_mixer") or {}
    alt2 = root.get("alt_mixer_2") or {}
    mixer = root.get("mixer") or {}
    feature_map = alt.get("feature_map") or {}
    c = ModelConfig(
        architecture=arch,
        d=d,
        num_layers=_first(root, "n_layer", "num_hidden_layers"),
        num_heads=heads,
        n_inner=_first(root, "n_inner", default=4 * d),
        vocab_size=root["vocab_size"],
        pad_vocab_size_multiple=root.get("pad_vocab_size_multiple", 8),
        norm_eps=root.get("layer_norm_epsilon", 1e-5),
        rotary_base=root.get("rotary_emb_base", 10000.0),
        feature_dim=alt.get("feature_dim", feature_map.get("input_dim", 16)),
        linear_attention_heads=alt.get("num_heads", heads),
        linear_attention_eps=alt.get("eps", 1e-12),
        window_size=alt2.get("window_size", 0),
        conv_expand_proj=mixer.get("expand_proj", 4),
        linear_attention_layers=list(root.get("alt_mixer_layers") or []),
        sliding_window_layers=list(root.get("alt_mixer_2_layers") or []),
        # JRT: top level wins over alt_mixer (a constructor argument upstream).
        enc_length=_first(root, "enc_length", default=alt.get("enc_length", 1024))
        if arch == "jrt"
        else 0,
        pad_token_id=root.get("prefix_pad_token_id", JRT_PAD_TOKEN_ID),
        tie_word_embeddings=root.get("tie_word_embeddings", True),
    )
    if arch == "jrt" and c.enc_length < 1:
        raise ValueError("config.json: a jrt model needs enc_length >= 1")
    return c


def expected_shapes(cfg: ModelConfig) -> Dict[str, Tuple[int, ...]]:
    """Every tensor a checkpoint of `cfg` must hold, by upstream name.

    lm_head.weight is not listed: with tied embeddings it is optional (the
    engine and the reference use the embedding), and it is required with
    shape [V_pad, d] only when tie_word_embeddings is false."""
    d, c, hid = cfg.d, cfg.conv_inner, cfg.mlp_hidden
    qk = cfg.linear_attention_heads * cfg.feature_dim
    shapes: Dict[str, Tuple[int, ...]] = {
        "transformer.embeddings.word_embeddings.weight": (cfg.padded_vocab_size, d),
        "transformer.ln_f.weight": (d,),
    }
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.padded_vocab_size, d)
    for i in range(cfg.num_layers):
        p = f"transformer.layers.{i}."
        shapes[p + "norm1.weight"] = (d,)
        shapes[p + "norm2.weight"] = (d,)
        shapes[p + "mlp.fc1.weight"] = (2 * hid, d)
        shapes[p + "mlp.fc2.weight"] = (d, hid)
        kind = cfg.mixer(i)
        if kind == CONV:
            shapes[p + "mixer.in_proj.weight"] = (2 * c, d)
            shapes[p + "mixer.in_proj.bias"] = (2 * c,)
            shapes[p + "mixer.out_proj.weight"] = (d, c)
            shapes[p + "mixer.out_proj.bias"] = (d,)
            shapes[p + "mixer.conv.conv.weight"] = (c, 1, cfg.conv_kernel_size)
        elif kind == LINEAR_ATTENTION:
            names = ["proj_q", "proj_k"] + (["proj_k_enc"] if cfg.architecture == "jrt" else [])
            for n in names:
                shapes[p + f"mixer.{n}.weight"] = (qk, d)
            names = ["proj_v"] + (["proj_v_enc"] if cfg.architecture == "jrt" else [])
            for n in names:
                shapes[p + f"mixer.{n}.weight"] = (d, d)
            shapes[p + "mixer.out_proj.weight"] = (d, d)
        else:
            shapes[p + "mixer.Wqkv.weight"] = (3 * d, d)
            shapes[p + "mixer.out_proj.weight"] = (d, d)
    return shapes
