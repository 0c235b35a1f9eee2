"""Requests and results shared by the blocking and the asyncio client.

Everything here is pure: it builds request messages (including the chunking
of uploads, see ``clients/python/README.md``) and turns response messages
into the values of :mod:`twice.types`. No I/O but reading a document file.
"""

from __future__ import annotations

import array
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from . import types as t
from ._stubs import Stubs, load
from .errors import Internal, InvalidArgument

#: Text bytes per streamed message (the server's and the CLI's 1 MiB).
TEXT_CHUNK_BYTES = 1 << 20
#: Token ids per streamed message (64 Ki; 256 KiB of int32).
TOKEN_CHUNK = 1 << 16

DocLike = Union[str, t.Document]
PathLike = Union[str, "os.PathLike[str]"]

_MODE_PREFIX = "ASK_MODE_"
_PREFILL_PREFIX = "PREFILL_MODE_"


class Payload:
    """A document (or appended part) ready to stream: UTF-8 bytes or ids."""

    def __init__(self, text: Optional[bytes] = None,
                 tokens: Optional["array.array[int]"] = None) -> None:
        self.text = text
        self.tokens = tokens

    @property
    def total_size(self) -> int:
        """Bytes of text or number of ids, as ``total_size`` announces it."""
        return len(self.text) if self.text is not None else len(self.tokens or ())

    def pieces(self) -> Iterator[Tuple[str, Sequence[int]]]:
        """(text, tokens) of each message; at least one, maybe empty."""
        if self.text is not None:
            for piece in utf8_pieces(self.text, TEXT_CHUNK_BYTES):
                yield piece, ()
        else:
            ids = self.tokens if self.tokens is not None else array.array("i")
            for start in range(0, max(len(ids), 1), TOKEN_CHUNK):
                yield "", ids[start:start + TOKEN_CHUNK]


def utf8_pieces(data: bytes, max_bytes: int) -> Iterator[str]:
    """Splits valid UTF-8 into pieces of at most ``max_bytes`` bytes, never
    inside a character. Yields one empty piece for empty input."""
    offset = 0
    while True:
        end = min(len(data), offset + max_bytes)
        if end < len(data):
            # Back up over continuation bytes (10xxxxxx) to a character start.
            cut = end
            while cut > offset and (data[cut] & 0xC0) == 0x80:
                cut -= 1
            end = cut if cut > offset else end
        yield data[offset:end].decode("utf-8")
        offset = end
        if offset >= len(data):
            return


def _utf8_error(source: str, data: bytes, error: UnicodeDecodeError) -> InvalidArgument:
    return InvalidArgument(
        f"{source} is not UTF-8 text: byte {error.start} (0x{data[error.start]:02X}) does "
        "not start a valid UTF-8 character. Convert it (for example `iconv -f LATIN1 -t "
        "UTF-8`), or send the document as token ids (tokens=...)")


def make_payload(text: Optional[str] = None, path: Optional[PathLike] = None,
                 tokens: Optional[Iterable[int]] = None) -> Payload:
    """Checks that exactly one source is given and reads it.

    Raises:
        TypeError: none or several of text, path and tokens.
        InvalidArgument: the text is not valid UTF-8.
        OverflowError: a token id does not fit in int32.
        OSError: the file cannot be read.
    """
    given = [name for name, value in (("text", text), ("path", path), ("tokens", tokens))
             if value is not None]
    if len(given) != 1:
        raise TypeError(f"pass exactly one of text=, path= or tokens= (got {given or 'none'})")
    if tokens is not None:
        if isinstance(tokens, (str, bytes)):
            raise TypeError("tokens= takes a sequence of int token ids")
        return Payload(tokens=array.array("i", tokens))
    if path is not None:
        data = open(path, "rb").read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _utf8_error(os.fspath(path), data, error) from None
        return Payload(text=data)
    assert text is not None
    if not isinstance(text, str):
        raise TypeError("text= takes a str (read bytes with path= or decode them)")
    try:
        return Payload(text=text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise InvalidArgument(f"text is not encodable as UTF-8: {error.reason}") from None


def doc_id(doc: DocLike) -> str:
    """The id of a document given as an id or a :class:`Document`."""
    return doc.document_id if isinstance(doc, t.Document) else doc


def ask_mode(pb: Stubs, mode: Optional[t.ModeLike]) -> int:
    """The proto AskMode value of a mode; ``None`` is the default mode.

    Raises:
        ValueError: not one of :class:`twice.Mode`'s values.
    """
    if mode is None:
        return pb.common_pb2.ASK_MODE_DEFAULT
    name = t.Mode(mode).value.upper()
    return pb.common_pb2.AskMode.Value(_MODE_PREFIX + name)


def sampling_proto(pb: Stubs, sampling: t.Sampling) -> Any:
    message = pb.common_pb2.SamplingOptions()
    if sampling.max_tokens is not None:
        message.max_tokens = sampling.max_tokens
    if sampling.temperature is not None:
        message.temperature = sampling.temperature
    if sampling.top_k is not None:
        message.top_k = sampling.top_k
    if sampling.top_p is not None:
        message.top_p = sampling.top_p
    if sampling.seed is not None:
        message.seed = sampling.seed
    if isinstance(sampling.stop, str):
        raise TypeError("stop= takes a sequence of strings")
    message.stop.extend(sampling.stop)
    message.ignore_eos = sampling.ignore_eos
    return message


def _set_question(message: Any, question: Union[str, Sequence[int]], tokens_field: str) -> None:
    if isinstance(question, str):
        message.question = question
    elif isinstance(question, bytes):
        raise TypeError("a question is a str or a sequence of token ids")
    else:
        getattr(message, tokens_field).extend(question)


def ingest_requests(pb: Stubs, payload: Payload, *, document_id: Optional[str],
                    model: Optional[str], segment_tokens: Optional[int], pin: bool,
                    prepare_prefix: bool) -> Iterator[Any]:
    """The Ingest stream: the header with the first piece, then the rest."""
    first = True
    for text, ids in payload.pieces():
        request = pb.orchestrator_pb2.IngestRequest(text=text, tokens=ids)
        if first:
            header = request.header
            header.model = model or ""
            header.document_id = document_id or ""
            header.segment_tokens = segment_tokens or 0
            header.pin = pin
            header.prepare_prefix = prepare_prefix
            header.total_size = payload.total_size
            first = False
        yield request


def append_requests(pb: Stubs, payload: Payload, *, document_id: str,
                    segment_tokens: Optional[int]) -> Iterator[Any]:
    """The Append stream: the first message names the document."""
    first = True
    for text, ids in payload.pieces():
        request = pb.orchestrator_pb2.AppendRequest(text=text, tokens=ids)
        if first:
            request.document_id = document_id
            request.segment_tokens = segment_tokens or 0
            request.total_size = payload.total_size
            first = False
        yield request


def ask_request(pb: Stubs, doc: DocLike, question: Union[str, Sequence[int]],
                mode: Optional[t.ModeLike], sampling: t.Sampling,
                as_of_tokens: Optional[int]) -> Any:
    request = pb.orchestrator_pb2.AskRequest(
        document_id=doc_id(doc), mode=ask_mode(pb, mode),
        sampling=sampling_proto(pb, sampling), as_of_tokens=as_of_tokens or 0)
    _set_question(request, question, "question_tokens")
    return request


def batch_ask_request(pb: Stubs, doc: DocLike,
                      questions: Sequence[Union[str, Sequence[int], t.Question]],
                      mode: Optional[t.ModeLike], sampling: t.Sampling,
                      as_of_tokens: Optional[int]) -> Any:
    request = pb.orchestrator_pb2.BatchAskRequest(document_id=doc_id(doc))
    for question in questions:
        if not isinstance(question, t.Question):
            question = t.Question(question)
        message = request.questions.add()
        _set_question(message, question.text, "question_tokens")
        message.mode = ask_mode(pb, question.mode if question.mode is not None else mode)
        message.sampling.CopyFrom(sampling_proto(pb, question.sampling or sampling))
        as_of = question.as_of_tokens if question.as_of_tokens is not None else as_of_tokens
        message.as_of_tokens = as_of or 0
    return request


def usage(message: Any) -> t.Usage:
    return t.Usage(
        tokens_prefilled=message.tokens_prefilled, tokens_decoded=message.tokens_decoded,
        states_reused=message.states_reused, states_recomputed=message.states_recomputed,
        tokens_reused=message.tokens_reused, ttft_ms=message.ttft_ms,
        total_ms=message.total_ms)


def document(pb: Stubs, message: Any) -> t.Document:
    prepared = tuple(
        pb.common_pb2.PrefillMode.Name(m)[len(_PREFILL_PREFIX):].lower()
        for m in message.prepared_modes)
    return t.Document(
        document_id=message.document_id, model=message.model, tokens=message.tokens,
        segments=tuple(t.Segment(s.end_token, s.state_key.digest.hex())
                       for s in message.segments),
        pinned=message.pinned, created_unix_ms=message.created_unix_ms,
        accessed_unix_ms=message.accessed_unix_ms, text_sha256=message.text_sha256,
        prepared_modes=prepared)


def progress(message: Any) -> t.Progress:
    return t.Progress(
        document_id=message.document_id, segments_done=message.segments_done,
        segments_total=message.segments_total, tokens_done=message.tokens_done,
        tokens_total=message.tokens_total, tokens_per_second=message.tokens_per_second,
        segments_reused=message.segments_reused, done=message.HasField("done"))


def models(pb: Stubs, message: Any) -> List[t.Model]:
    result = []
    for m in message.models:
        modes = tuple(t.Mode(pb.common_pb2.AskMode.Name(v)[len(_MODE_PREFIX):].lower())
                      for v in m.modes if v != pb.common_pb2.ASK_MODE_UNSPECIFIED)
        result.append(t.Model(
            name=m.name, architecture=m.architecture, fingerprint=m.fingerprint,
            vocab_size=m.vocab_size, training_context=m.training_context,
            state_bytes=m.state_bytes, modes=modes, tokenizer_sha256=m.tokenizer_sha256,
            is_default=m.name == message.default_model))
    return result


def missing_final(call: str) -> Internal:
    return Internal(f"{call}: the stream ended without its final message")


class AnswerBuilder:
    """Collects the messages of one answer into an :class:`Answer`."""

    def __init__(self) -> None:
        self.pieces: List[str] = []
        self.tokens: List[int] = []
        self.answer: Optional[t.Answer] = None

    def add(self, message: Any) -> None:
        """Adds one AskResponse; sets ``answer`` on the final one."""
        self.pieces.append(message.text)
        self.tokens.extend(message.tokens)
        if message.finished:
            self.answer = t.Answer(
                text="".join(self.pieces), tokens=tuple(self.tokens),
                finish_reason=message.finish_reason, usage=usage(message.usage))

    def result(self, call: str) -> t.Answer:
        if self.answer is None:
            raise missing_final(call)
        return self.answer


class BatchBuilder:
    """Collects the interleaved answers of a BatchAsk, in question order."""

    def __init__(self, count: int) -> None:
        self.answers: Dict[int, AnswerBuilder] = {i: AnswerBuilder() for i in range(count)}

    def add(self, message: Any) -> None:
        builder = self.answers.get(message.index)
        if builder is None:
            raise Internal(f"BatchAsk: answer for unknown question {message.index}")
        builder.add(message.response)

    def result(self) -> List[t.Answer]:
        return [self.answers[i].result(f"BatchAsk question {i}")
                for i in range(len(self.answers))]


def read_pem(value: Any) -> Optional[bytes]:
    """PEM bytes from bytes or from a file path (``None`` stays ``None``)."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


def channel_setup(address: str, tls: Optional[t.TlsOptions],
                  options: Sequence[Tuple[str, Any]]) -> Tuple[Any, List[Tuple[str, Any]]]:
    """(credentials or None, channel options) for an address and TLS settings."""
    channel_options = list(options)
    if tls is None:
        return None, channel_options
    if (tls.cert is None) != (tls.key is None):
        raise TypeError("TlsOptions: give both cert and key, or neither")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read_pem(tls.ca), private_key=read_pem(tls.key),
        certificate_chain=read_pem(tls.cert))
    if tls.server_name:
        channel_options.append(("grpc.ssl_target_name_override", tls.server_name))
    return credentials, channel_options


def metadata(token: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    """Call metadata: the bearer token the server's tenant auth reads."""
    return (("authorization", f"Bearer {token}"),) if token else ()


class Connection:
    """What both clients hold: stubs, call metadata, the channel, the
    orchestrator stub and the health check. `channels` is ``grpc`` for the
    blocking client and ``grpc.aio`` for the asyncio one."""

    def __init__(self, channels: Any, address: str, token: Optional[str],
                 tls: Optional[t.TlsOptions], options: Sequence[Tuple[str, Any]]) -> None:
        self.pb = load()
        self.metadata = metadata(token if token is not None else os.environ.get("TWICE_TOKEN"))
        credentials, channel_options = channel_setup(address, tls, options)
        if credentials is None:
            self.channel = channels.insecure_channel(address, channel_options)
        else:
            self.channel = channels.secure_channel(address, credentials, channel_options)
        self.stub = self.pb.orchestrator_pb2_grpc.OrchestratorStub(self.channel)
        self.health = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=self.pb.health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=self.pb.health_pb2.HealthCheckResponse.FromString)
