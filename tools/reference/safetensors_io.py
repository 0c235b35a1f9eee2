"""A tiny safetensors reader and writer (torch tensors in, torch tensors out).

Debian ships no `safetensors` package, and the format is small enough to
handle directly:

    u64 little-endian N | N bytes of JSON header | data section

The header maps each tensor name to {"dtype", "shape", "data_offsets":
[begin, end]} (byte offsets into the data section) and may hold a
"__metadata__" object of string values. The writer pads the header with
spaces to a multiple of 8 bytes, as the reference implementation does, and
lays tensors out in name order.
"""

from __future__ import annotations

import json
import struct
from typing import Dict, Mapping, Optional

import torch

# safetensors dtype name <-> torch dtype.
DTYPES: Dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
NAMES: Dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    """Row-major little-endian bytes of `t` (numpy has no bfloat16)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def _from_bytes(raw: bytes, dtype: torch.dtype, shape: list) -> torch.Tensor:
    count = 1
    for s in shape:
        count *= s
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    # bytearray: frombuffer wants a writable buffer it may share.
    if dtype == torch.bfloat16:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(dtype)
    else:
        flat = torch.frombuffer(bytearray(raw), dtype=dtype)
    return flat.reshape(shape).clone()


def read_header(data: bytes, path: str = "<bytes>") -> tuple[dict, int]:
    """Returns (header dict, offset of the data section); validates spans."""
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    start = 8 + n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info.get("dtype") not in DTYPES:
            raise ValueError(f"{path}: {name}: unknown dtype {info.get('dtype')}")
        b, e = info["data_offsets"]
        size = torch.empty((), dtype=DTYPES[info["dtype"]]).element_size()
        for s in info["shape"]:
            size *= s
        if not 0 <= b <= e <= len(data) - start or e - b != size:
            raise ValueError(f"{path}: {name}: bad data_offsets {b}, {e}")
    return header, start


def read_safetensors(path: str) -> tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """Every tensor of the file (in its stored dtype) and the metadata."""
    with open(path, "rb") as f:
        data = f.read()
    header, start = read_header(data, path)
    tensors: Dict[str, torch.Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        tensors[name] = _from_bytes(
            data[start + b : start + e], DTYPES[info["dtype"]], info["shape"]
        )
    return tensors, dict(header.get("__metadata__", {}))


def write_safetensors(
    path: str,
    tensors: Mapping[str, torch.Tensor],
    metadata: Optional[Mapping[str, str]] = None,
) -> None:
    """Writes `tensors` (each in its own dtype) one at a time, so a large
    checkpoint is never held twice in memory."""
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        if t.dtype not in NAMES:
            raise ValueError(f"{name}: dtype {t.dtype} has no safetensors name")
        size = t.numel() * t.element_size()
        header[name] = {
            "dtype": NAMES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name in names:
            f.write(_tensor_bytes(tensors[name]))
