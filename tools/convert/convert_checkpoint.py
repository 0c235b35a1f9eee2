#!/usr/bin/python3
"""Converts an upstream Based / JRT-RNN `pytorch_model.bin` to safetensors.

    /usr/bin/python3 tools/convert/convert_checkpoint.py SRC OUT_DIR
        [--config CONFIG_JSON] [--tokenizer TOKENIZER_JSON]
        [--dtype keep|f32|bf16|f16] [--trust-pickle]

SRC is a checkpoint file or a directory holding pytorch_model.bin (and
config.json / tokenizer.json, unless given). OUT_DIR receives the model
directory the engine loads: model.safetensors, config.json (copied byte for
byte, after validation) and tokenizer.json when one is found.

Upstream's loading rules are applied, so the engine sees the names upstream's
strict load_state_dict would: the state dict may be nested under
"state_dict" or "model"; a leading Lightning "model." prefix is stripped;
entries whose name contains "metrics" are dropped; the legacy BaseConv name
"conv1" becomes "conv". With tied embeddings an lm_head.weight equal to the
embedding is dropped (safetensors cannot share storage, and the engine reads
the embedding). Tensors keep their dtype (f32 / bf16 / f16) unless --dtype
says otherwise.

Validation: config.json must parse as a Based or JRT config, every tensor it
implies must be present with its shape, and the tokenizer must fit the
embedding. Unknown extra tensors are kept and listed (e.g. the unused
transformer.decay.decay buffer). Exit status 0 on success, 1 on any error.

The checkpoint is unpickled with torch.load(weights_only=True), which only
rebuilds tensors and plain containers; --trust-pickle allows arbitrary
pickled objects (Lightning checkpoints with hyper-parameter objects) and
must only be used on files you trust.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Dict, List

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reference.config import expected_shapes, parse_config  # noqa: E402
from reference.model import EMBEDDING, LM_HEAD, canonical_name, tokenizer_vocab_size  # noqa: E402
from reference.safetensors_io import write_safetensors  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
KEPT_FLOATS = set(DTYPES.values())


class ConversionError(Exception):
    pass


def load_state_dict(path: str, trust_pickle: bool) -> Dict[str, torch.Tensor]:
    """The checkpoint's tensors by stored name, unwrapped from a training
    checkpoint's "state_dict" / "model" entry when nested."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=not trust_pickle)
    except Exception as e:  # unpickling raises many types
        hint = "" if trust_pickle else " (if you trust the file, retry with --trust-pickle)"
        raise ConversionError(f"{path}: cannot load: {e}{hint}") from e
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict):
        raise ConversionError(f"{path}: holds a {type(obj).__name__}, not a state dict")
    return {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}


def canonicalize(stored: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    out: Dict[str, torch.Tensor] = {}
    for name, t in stored.items():
        canon = canonical_name(name)
        if canon is None:
            continue
        if canon in out:
            raise ConversionError(f"two tensors map to {canon!r} (one is {name!r})")
        out[canon] = t
    return out


def convert_dtypes(tensors: Dict[str, torch.Tensor], dtype: str) -> None:
    for name, t in tensors.items():
        if not t.is_floating_point():
            continue
        if dtype != "keep":
            tensors[name] = t.to(DTYPES[dtype])
        elif t.dtype not in KEPT_FLOATS:
            raise ConversionError(f"{name} is {t.dtype}; pass --dtype f32, bf16 or f16")


def validate(tensors: Dict[str, torch.Tensor], config_text: str, tokenizer: str) -> List[str]:
    """Raises on a missing or mis-shaped tensor; returns the unexpected names."""
    try:
        cfg = parse_config(config_text)
    except (ValueError, KeyError, TypeError) as e:
        raise ConversionError(f"config.json: {e}") from e
    want = expected_shapes(cfg)
    if EMBEDDING not in tensors and LM_HEAD in tensors and cfg.tie_word_embeddings:
        want[LM_HEAD] = want.pop(EMBEDDING)  # the tied matrix under its other name
    problems = []
    for name, shape in want.items():
        if name not in tensors:
            problems.append(f"missing {name} {list(shape)}")
        elif tuple(tensors[name].shape) != shape:
            problems.append(f"{name} is {list(tensors[name].shape)}, config implies {list(shape)}")
    if LM_HEAD in tensors and tuple(tensors[LM_HEAD].shape) != (cfg.padded_vocab_size, cfg.d):
        problems.append(f"{LM_HEAD} is {list(tensors[LM_HEAD].shape)}")
    if tokenizer:
        n = tokenizer_vocab_size(tokenizer)
        if n > cfg.padded_vocab_size:
            problems.append(f"tokenizer has {n} ids, the embedding {cfg.padded_vocab_size} rows")
    if problems:
        raise ConversionError("checkpoint does not match config.json:\n  " + "\n  ".join(problems))
    return sorted(set(tensors) - set(want) - {LM_HEAD})


def drop_tied_head(tensors: Dict[str, torch.Tensor], config_text: str) -> bool:
    cfg = parse_config(config_text)
    if (
        cfg.tie_word_embeddings
        and EMBEDDING in tensors
        and LM_HEAD in tensors
        and torch.equal(tensors[EMBEDDING], tensors[LM_HEAD])
    ):
        del tensors[LM_HEAD]
        return True
    return False


def find(src_dir: str, given: str, name: str) -> str:
    if given:
        return given
    path = os.path.join(src_dir, name)
    return path if os.path.exists(path) else ""


def convert(args: argparse.Namespace) -> None:
    src_dir = args.src if os.path.isdir(args.src) else os.path.dirname(args.src)
    ckpt = os.path.join(args.src, "pytorch_model.bin") if os.path.isdir(args.src) else args.src
    config = find(src_dir, args.config, "config.json")
    tokenizer = find(src_dir, args.tokenizer, "tokenizer.json")
    if not config:
        raise ConversionError(f"no config.json in {src_dir}; pass --config")
    with open(config, encoding="utf-8") as f:
        config_text = f.read()
    tensors = canonicalize(load_state_dict(ckpt, args.trust_pickle))
    convert_dtypes(tensors, args.dtype)
    extra = validate(tensors, config_text, tokenizer)
    dropped = drop_tied_head(tensors, config_text)
    os.makedirs(args.out_dir, exist_ok=True)
    write_safetensors(os.path.join(args.out_dir, "model.safetensors"), tensors, {"format": "pt"})
    shutil.copyfile(config, os.path.join(args.out_dir, "config.json"))
    if tokenizer:
        shutil.copyfile(tokenizer, os.path.join(args.out_dir, "tokenizer.json"))
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    print(f"wrote {len(tensors)} tensors ({', '.join(dtypes)}) to {args.out_dir}")
    if dropped:
        print(f"dropped {LM_HEAD}: tied to {EMBEDDING}")
    if extra:
        print("kept tensors the config does not use: " + ", ".join(extra))
    if not tokenizer:
        print("warning: no tokenizer.json; copy one into the output directory")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", help="pytorch_model.bin, or a directory holding it")
    parser.add_argument("out_dir")
    parser.add_argument("--config", default="", help="config.json (default: beside SRC)")
    parser.add_argument("--tokenizer", default="", help="tokenizer.json (default: beside SRC)")
    parser.add_argument("--dtype", choices=["keep", *DTYPES], default="keep")
    parser.add_argument("--trust-pickle", action="store_true")
    args = parser.parse_args(argv[1:])
    try:
        convert(args)
    except (ConversionError, OSError) as e:
        print(f"convert_checkpoint: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
