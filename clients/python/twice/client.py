"""The blocking client.

A :class:`Client` holds one gRPC channel; it is thread safe, and one client
per process and server is enough. Every method raises a
:class:`twice.TwiceError` subclass when the call fails.
"""

from __future__ import annotations

from typing import (Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    Union)

import grpc

from . import _convert as c
from . import types as t
from .errors import from_rpc_error

ProgressCallback = Callable[[t.Progress], Any]
QuestionLike = Union[str, Sequence[int], t.Question]

#: Default server address, as the ``twice`` CLI's ``--server``.
DEFAULT_ADDRESS = "127.0.0.1:50051"


class Client:
    """Talks to a Twice server's public API (``twice.v1.Orchestrator``).

    Args:
        address: ``HOST:PORT`` of the server. Default: ``127.0.0.1:50051``.
        token: bearer token of the caller's tenant, sent as
            ``authorization: Bearer TOKEN`` on every call. Default:
            ``$TWICE_TOKEN`` when set, else none (a server without
            ``--auth-tokens-file`` needs none).
        tls: connect over TLS (see :class:`twice.TlsOptions`). Default:
            plaintext, which a server without a certificate accepts on
            loopback only.
        timeout: deadline of each call in seconds; every method also takes
            ``timeout=``. Default: none.
        options: extra gRPC channel options, ``(name, value)`` pairs.

    Usable as a context manager; :meth:`close` releases the channel.
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, token: Optional[str] = None,
                 tls: Optional[t.TlsOptions] = None, timeout: Optional[float] = None,
                 options: Sequence[Tuple[str, Any]] = ()) -> None:
        connection = c.Connection(grpc, address, token, tls, options)
        self._pb = connection.pb
        self._timeout = timeout
        self._metadata = connection.metadata
        self._channel = connection.channel
        self._stub = connection.stub
        self._health = connection.health

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents -------------------------------------------------------

    def ingest(self, text: Optional[str] = None, *, path: Optional[c.PathLike] = None,
               tokens: Optional[Iterable[int]] = None, doc_id: Optional[str] = None,
               model: Optional[str] = None, segment_tokens: Optional[int] = None,
               pin: bool = False, prepare_prefix: bool = False,
               progress: Optional[ProgressCallback] = None,
               timeout: Optional[float] = None) -> t.Document:
        """Reads a document into stored states and returns it.

        Give exactly one of ``text`` (a str), ``path`` (a UTF-8 file) or
        ``tokens`` (token ids). Ingesting the same document again costs
        nothing, and an interrupted ingest resumes.

        Args:
            doc_id: the document's id. Default: derived from the content, so
                the same document always gets the same id.
            model: model to read it with. Default: the server's default.
            segment_tokens: tokens per stored segment (at least 16).
                Default: the model's training context.
            pin: never evict the document's states.
            prepare_prefix: also prepare the prefix-mode state (JRT models
                always get it).
            progress: called with a :class:`twice.Progress` for every
                progress message, and once more with ``done=True`` at the
                end (its ``segments_reused`` is the call's total).
        """
        payload = c.make_payload(text, path, tokens)
        requests = c.ingest_requests(
            self._pb, payload, document_id=doc_id, model=model,
            segment_tokens=segment_tokens, pin=pin, prepare_prefix=prepare_prefix)
        return self._write_stream(self._stub.Ingest, requests, progress, timeout, "Ingest")

    def append(self, doc: c.DocLike, text: Optional[str] = None, *,
               tokens: Optional[Iterable[int]] = None, path: Optional[c.PathLike] = None,
               segment_tokens: Optional[int] = None,
               progress: Optional[ProgressCallback] = None,
               timeout: Optional[float] = None) -> t.Document:
        """Appends text or token ids to a stored document; only the new
        tokens are read. Text is tokenized on its own, not together with the
        document's end: send token ids for token-exact control."""
        payload = c.make_payload(text, path, tokens)
        requests = c.append_requests(self._pb, payload, document_id=c.doc_id(doc),
                                     segment_tokens=segment_tokens)
        return self._write_stream(self._stub.Append, requests, progress, timeout, "Append")

    def document(self, doc: c.DocLike, *, timeout: Optional[float] = None) -> t.Document:
        """Describes one document."""
        request = self._pb.orchestrator_pb2.GetDocumentRequest(document_id=c.doc_id(doc))
        return c.document(self._pb, self._unary(self._stub.GetDocument, request, timeout))

    def documents(self, *, page_size: Optional[int] = None,
                  timeout: Optional[float] = None) -> Iterator[t.Document]:
        """Iterates over all of the caller's documents, newest first,
        fetching pages of ``page_size`` (default: the server's, 100)."""
        token = ""
        while True:
            request = self._pb.orchestrator_pb2.ListDocumentsRequest(
                page_size=page_size or 0, page_token=token)
            response = self._unary(self._stub.ListDocuments, request, timeout)
            for info in response.documents:
                yield c.document(self._pb, info)
            token = response.next_page_token
            if not token:
                return

    def delete(self, doc: c.DocLike, *, timeout: Optional[float] = None) -> int:
        """Deletes a document; returns the number of states deleted (states
        other documents share are kept)."""
        request = self._pb.orchestrator_pb2.DeleteDocumentRequest(document_id=c.doc_id(doc))
        return self._unary(self._stub.DeleteDocument, request, timeout).states_deleted

    def pin(self, doc: c.DocLike, pinned: bool = True, *,
            timeout: Optional[float] = None) -> t.Document:
        """Pins (or with ``pinned=False`` unpins) a document."""
        request = self._pb.orchestrator_pb2.PinDocumentRequest(
            document_id=c.doc_id(doc), pinned=pinned)
        return c.document(self._pb, self._unary(self._stub.PinDocument, request, timeout))

    # -- questions -------------------------------------------------------

    def ask(self, doc: c.DocLike, question: Union[str, Sequence[int]], *,
            mode: Optional[t.ModeLike] = None, max_tokens: Optional[int] = None,
            temperature: Optional[float] = None, top_k: Optional[int] = None,
            top_p: Optional[float] = None, seed: Optional[int] = None,
            stop: Sequence[str] = (), ignore_eos: bool = False,
            as_of_tokens: Optional[int] = None,
            timeout: Optional[float] = None) -> t.Answer:
        """Asks one question (text or token ids) of a document.

        Args:
            mode: a :class:`twice.Mode` or its value. Default: ``default``.
            max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos:
                sampling, as :class:`twice.Sampling`. Default: greedy, the
                server's max_tokens (64).
            as_of_tokens: answer over the document's first N tokens only.
        """
        sampling = t.Sampling(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        request = c.ask_request(self._pb, doc, question, mode, sampling, as_of_tokens)
        builder = c.AnswerBuilder()
        for message in self._server_stream(self._stub.Ask, request, timeout):
            builder.add(message)
        return builder.result("Ask")

    def ask_stream(self, doc: c.DocLike, question: Union[str, Sequence[int]], *,
                   mode: Optional[t.ModeLike] = None, max_tokens: Optional[int] = None,
                   temperature: Optional[float] = None, top_k: Optional[int] = None,
                   top_p: Optional[float] = None, seed: Optional[int] = None,
                   stop: Sequence[str] = (), ignore_eos: bool = False,
                   as_of_tokens: Optional[int] = None,
                   timeout: Optional[float] = None) -> Iterator[Union[str, t.Answer]]:
        """As :meth:`ask`, streamed: yields each new piece of text (a str)
        as it is generated, then the complete :class:`twice.Answer` (with
        its usage and finish reason). Leaving the loop early cancels the
        call."""
        sampling = t.Sampling(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        request = c.ask_request(self._pb, doc, question, mode, sampling, as_of_tokens)
        builder = c.AnswerBuilder()
        for message in self._server_stream(self._stub.Ask, request, timeout):
            builder.add(message)
            if message.text:
                yield message.text
        yield builder.result("Ask")

    def batch_ask(self, doc: c.DocLike, questions: Sequence[QuestionLike], *,
                  mode: Optional[t.ModeLike] = None, max_tokens: Optional[int] = None,
                  temperature: Optional[float] = None, top_k: Optional[int] = None,
                  top_p: Optional[float] = None, seed: Optional[int] = None,
                  stop: Sequence[str] = (), ignore_eos: bool = False,
                  as_of_tokens: Optional[int] = None,
                  timeout: Optional[float] = None) -> List[t.Answer]:
        """Asks several questions of one document; they share one load of
        its state and run concurrently. Each question is a str, token ids or
        a :class:`twice.Question` (whose own mode, sampling and as_of_tokens
        override the call's). Returns the answers in question order."""
        sampling = t.Sampling(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        request = c.batch_ask_request(self._pb, doc, questions, mode, sampling, as_of_tokens)
        builder = c.BatchBuilder(len(request.questions))
        for message in self._server_stream(self._stub.BatchAsk, request, timeout):
            builder.add(message)
        return builder.result()

    # -- deployment ------------------------------------------------------

    def models(self, *, timeout: Optional[float] = None) -> List[t.Model]:
        """The served models; the default one has ``is_default`` set."""
        request = self._pb.orchestrator_pb2.ListModelsRequest()
        return c.models(self._pb, self._unary(self._stub.ListModels, request, timeout))

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """The gRPC health status: ``"SERVING"``, or ``"NOT_SERVING"`` while
        the server drains."""
        request = self._pb.health_pb2.HealthCheckRequest(service=service)
        response = self._unary(self._health, request, timeout)
        return self._pb.health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    # -- plumbing --------------------------------------------------------

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return timeout if timeout is not None else self._timeout

    def _unary(self, method: Any, request: Any, timeout: Optional[float]) -> Any:
        try:
            return method(request, timeout=self._deadline(timeout), metadata=self._metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    def _server_stream(self, method: Any, request: Any,
                       timeout: Optional[float]) -> Iterator[Any]:
        call = method(request, timeout=self._deadline(timeout), metadata=self._metadata)
        try:
            yield from call
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()  # no-op when finished; stops the server's work otherwise

    def _write_stream(self, method: Any, requests: Iterator[Any],
                      progress: Optional[ProgressCallback], timeout: Optional[float],
                      name: str) -> t.Document:
        result = None
        for message in self._server_stream(method, requests, timeout):
            if progress is not None:
                progress(c.progress(message))
            if message.HasField("done"):
                result = c.document(self._pb, message.done)
        if result is None:
            raise c.missing_final(name)
        return result
