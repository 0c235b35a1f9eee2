"""Plain Python values returned by the client (no protobuf objects)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union


class Mode(str, enum.Enum):
    """How a question is answered (``AskMode`` in ``common.proto``).

    A plain string (``"read_twice"``) is accepted wherever a Mode is.
    """

    #: Resume from the stored document state; read the question.
    DEFAULT = "default"
    #: Resume from the stored state (the cached first read); read the
    #: question, the document again, then the question (JRT-Prompt).
    READ_TWICE = "read_twice"
    #: From an empty state: question, document, document, question.
    READ_TWICE_FULL = "read_twice_full"
    #: Resume from the document encoded as a non-causal prefix (JRT-RNN).
    PREFIX = "prefix"
    #: Encode question + document as the non-causal prefix (JRT-RNN).
    PREFIX_WITH_QUESTION = "prefix_with_question"


ModeLike = Union[Mode, str]


@dataclass(frozen=True)
class Sampling:
    """Token sampling; ``None`` leaves the server's default.

    Attributes:
        max_tokens: tokens to generate. Default: the server's (64).
        temperature: softmax temperature. Default: 0, greedy.
        top_k: keep the k most likely tokens. Default: no limit.
        top_p: nucleus mass. Default: no limit.
        seed: sampler seed; same seed, state and options, same answer.
        stop: generation stops after any of these strings (not returned).
        ignore_eos: keep generating past the end-of-sequence token.
    """

    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    seed: Optional[int] = None
    stop: Sequence[str] = ()
    ignore_eos: bool = False


@dataclass(frozen=True)
class Question:
    """One question of :meth:`twice.Client.batch_ask`.

    ``text`` is a string or a sequence of token ids. ``mode``, ``sampling``
    and ``as_of_tokens`` left as ``None`` take the batch call's values.
    """

    text: Union[str, Sequence[int]]
    mode: Optional[ModeLike] = None
    sampling: Optional[Sampling] = None
    as_of_tokens: Optional[int] = None


@dataclass(frozen=True)
class Usage:
    """What an answer cost and what it reused (``Usage`` in ``common.proto``)."""

    tokens_prefilled: int = 0
    tokens_decoded: int = 0
    states_reused: int = 0
    states_recomputed: int = 0
    tokens_reused: int = 0
    ttft_ms: float = 0.0
    total_ms: float = 0.0


@dataclass(frozen=True)
class Answer:
    """A complete answer: its text, token ids, why it ended and its usage."""

    text: str
    tokens: Tuple[int, ...]
    finish_reason: str
    usage: Usage


@dataclass(frozen=True)
class Segment:
    """A segment boundary: a token-exact resume point."""

    end_token: int
    state_key: str  # hex SHA-256


@dataclass(frozen=True)
class Document:
    """A stored document (``DocumentInfo`` in ``common.proto``)."""

    document_id: str
    model: str
    tokens: int
    segments: Tuple[Segment, ...] = ()
    pinned: bool = False
    created_unix_ms: int = 0
    accessed_unix_ms: int = 0
    #: Hex SHA-256 of the text; empty when ingested as tokens or appended to.
    text_sha256: str = ""
    #: Extra states prepared at ingest, e.g. ``("prefix",)`` for JRT models.
    prepared_modes: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Progress:
    """Progress of an ingest or append; ``done`` is set on the last one."""

    document_id: str
    segments_done: int
    segments_total: int
    tokens_done: int
    tokens_total: int
    tokens_per_second: float
    #: Segments found already stored and not recomputed.
    segments_reused: int
    done: bool = False


@dataclass(frozen=True)
class Model:
    """A served model (``ModelInfo`` in ``common.proto``)."""

    name: str
    architecture: str
    fingerprint: str
    vocab_size: int
    training_context: int
    state_bytes: int
    modes: Tuple[Mode, ...]
    tokenizer_sha256: str
    #: The model used when a request names none.
    is_default: bool = False


@dataclass(frozen=True)
class TlsOptions:
    """TLS for the connection.

    Each field is a path to a PEM file or the PEM bytes themselves.

    Attributes:
        ca: trust roots the server's certificate is verified against.
            Default: the system's roots.
        cert: client certificate, for servers that require one (mTLS).
        key: private key of ``cert``.
        server_name: name to verify in the server's certificate instead of
            the address's host (``grpc.ssl_target_name_override``).
    """

    ca: Any = None  # str | os.PathLike | bytes | None
    cert: Any = None
    key: Any = None
    server_name: Optional[str] = None

