"""The asyncio client: :class:`twice.aio.Client`, over ``grpc.aio``.

Same methods, arguments and results as :class:`twice.Client`, as
coroutines; :meth:`Client.ask_stream` and :meth:`Client.documents` are
async iterators. Create the client inside the event loop that uses it::

    async with twice.aio.Client("127.0.0.1:50051") as client:
        answers = await asyncio.gather(*(client.ask(doc, q) for q in questions))
"""

from __future__ import annotations

import inspect
from typing import (Any, AsyncIterator, Callable, Iterable, List, Optional, Sequence, Tuple,
                    Union)

import grpc
import grpc.aio

from . import _convert as c
from . import types as t
from .client import DEFAULT_ADDRESS, QuestionLike
from .errors import from_rpc_error

#: Called with each :class:`twice.Progress`; may be a coroutine function.
ProgressCallback = Callable[[t.Progress], Any]

__all__ = ["Client"]


class Client:
    """Asyncio twin of :class:`twice.Client` (see it for the arguments).

    Many calls may run concurrently on one client (``asyncio.gather``).
    Usable as an async context manager; ``await close()`` releases it.
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, token: Optional[str] = None,
                 tls: Optional[t.TlsOptions] = None, timeout: Optional[float] = None,
                 options: Sequence[Tuple[str, Any]] = ()) -> None:
        connection = c.Connection(grpc.aio, address, token, tls, options)
        self._pb = connection.pb
        self._timeout = timeout
        self._metadata = connection.metadata
        self._channel = connection.channel
        self._stub = connection.stub
        self._health = connection.health

    async def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- documents -------------------------------------------------------

    async def ingest(self, text: Optional[str] = None, *, path: Optional[c.PathLike] = None,
                     tokens: Optional[Iterable[int]] = None, doc_id: Optional[str] = None,
                     model: Optional[str] = None, segment_tokens: Optional[int] = None,
                     pin: bool = False, prepare_prefix: bool = False,
                     progress: Optional[ProgressCallback] = None,
                     timeout: Optional[float] = None) -> t.Document:
        """See :meth:`twice.Client.ingest`."""
        payload = c.make_payload(text, path, tokens)
        requests = c.ingest_requests(
            self._pb, payload, document_id=doc_id, model=model,
            segment_tokens=segment_tokens, pin=pin, prepare_prefix=prepare_prefix)
        return await self._write_stream(self._stub.Ingest, requests, progress, timeout,
                                        "Ingest")

    async def append(self, doc: c.DocLike, text: Optional[str] = None, *,
                     tokens: Optional[Iterable[int]] = None,
                     path: Optional[c.PathLike] = None, segment_tokens: Optional[int] = None,
                     progress: Optional[ProgressCallback] = None,
                     timeout: Optional[float] = None) -> t.Document:
        """See :meth:`twice.Client.append`."""
        payload = c.make_payload(text, path, tokens)
        requests = c.append_requests(self._pb, payload, document_id=c.doc_id(doc),
                                     segment_tokens=segment_tokens)
        return await self._write_stream(self._stub.Append, requests, progress, timeout,
                                        "Append")

    async def document(self, doc: c.DocLike, *,
                       timeout: Optional[float] = None) -> t.Document:
        """See :meth:`twice.Client.document`."""
        request = self._pb.orchestrator_pb2.GetDocumentRequest(document_id=c.doc_id(doc))
        return c.document(self._pb, await self._unary(self._stub.GetDocument, request,
                                                      timeout))

    async def documents(self, *, page_size: Optional[int] = None,
                        timeout: Optional[float] = None) -> AsyncIterator[t.Document]:
        """See :meth:`twice.Client.documents` (an async iterator here)."""
        token = ""
        while True:
            request = self._pb.orchestrator_pb2.ListDocumentsRequest(
                page_size=page_size or 0, page_token=token)
            response = await self._unary(self._stub.ListDocuments, request, timeout)
            for info in response.documents:
                yield c.document(self._pb, info)
            token = response.next_page_token
            if not token:
                return

    async def delete(self, doc: c.DocLike, *, timeout: Optional[float] = None) -> int:
        """See :meth:`twice.Client.delete`."""
        request = self._pb.orchestrator_pb2.DeleteDocumentRequest(document_id=c.doc_id(doc))
        response = await self._unary(self._stub.DeleteDocument, request, timeout)
        return response.states_deleted

    async def pin(self, doc: c.DocLike, pinned: bool = True, *,
                  timeout: Optional[float] = None) -> t.Document:
        """See :meth:`twice.Client.pin`."""
        request = self._pb.orchestrator_pb2.PinDocumentRequest(
            document_id=c.doc_id(doc), pinned=pinned)
        return c.document(self._pb, await self._unary(self._stub.PinDocument, request,
                                                      timeout))

    # -- questions -------------------------------------------------------

    async def ask(self, doc: c.DocLike, question: Union[str, Sequence[int]], *,
                  mode: Optional[t.ModeLike] = None, max_tokens: Optional[int] = None,
                  temperature: Optional[float] = None, top_k: Optional[int] = None,
                  top_p: Optional[float] = None, seed: Optional[int] = None,
                  stop: Sequence[str] = (), ignore_eos: bool = False,
                  as_of_tokens: Optional[int] = None,
                  timeout: Optional[float] = None) -> t.Answer:
        """See :meth:`twice.Client.ask`."""
        sampling = t.Sampling(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        request = c.ask_request(self._pb, doc, question, mode, sampling, as_of_tokens)
        builder = c.AnswerBuilder()
        async for message in self._server_stream(self._stub.Ask, request, timeout):
            builder.add(message)
        return builder.result("Ask")

    async def ask_stream(self, doc: c.DocLike, question: Union[str, Sequence[int]], *,
                         mode: Optional[t.ModeLike] = None,
                         max_tokens: Optional[int] = None,
                         temperature: Optional[float] = None, top_k: Optional[int] = None,
                         top_p: Optional[float] = None, seed: Optional[int] = None,
                         stop: Sequence[str] = (), ignore_eos: bool = False,
                         as_of_tokens: Optional[int] = None,
                         timeout: Optional[float] = None
                         ) -> AsyncIterator[Union[str, t.Answer]]:
        """See :meth:`twice.Client.ask_stream` (an async iterator here)."""
        sampling = t.Sampling(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        request = c.ask_request(self._pb, doc, question, mode, sampling, as_of_tokens)
        builder = c.AnswerBuilder()
        async for message in self._server_stream(self._stub.Ask, request, timeout):
            builder.add(message)
            if message.text:
                yield message.text
        yield builder.result("Ask")

    async def batch_ask(self, doc: c.DocLike, questions: Sequence[QuestionLike], *,
                        mode: Optional[t.ModeLike] = None, max_tokens: Optional[int] = None,
                        temperature: Optional[float] = None, top_k: Optional[int] = None,
                        top_p: Optional[float] = None, seed: Optional[int] = None,
                        stop: Sequence[str] = (), ignore_eos: bool = False,
                        as_of_tokens: Optional[int] = None,
                        timeout: Optional[float] = None) -> List[t.Answer]:
        """See :meth:`twice.Client.batch_ask`."""
        sampling = t.Sampling(max_tokens, temperature, top_k, top_p, seed, stop, ignore_eos)
        request = c.batch_ask_request(self._pb, doc, questions, mode, sampling, as_of_tokens)
        builder = c.BatchBuilder(len(request.questions))
        async for message in self._server_stream(self._stub.BatchAsk, request, timeout):
            builder.add(message)
        return builder.result()

    # -- deployment ------------------------------------------------------

    async def models(self, *, timeout: Optional[float] = None) -> List[t.Model]:
        """See :meth:`twice.Client.models`."""
        request = self._pb.orchestrator_pb2.ListModelsRequest()
        return c.models(self._pb, await self._unary(self._stub.ListModels, request, timeout))

    async def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """See :meth:`twice.Client.health`."""
        request = self._pb.health_pb2.HealthCheckRequest(service=service)
        response = await self._unary(self._health, request, timeout)
        return self._pb.health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    # -- plumbing --------------------------------------------------------

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return timeout if timeout is not None else self._timeout

    async def _unary(self, method: Any, request: Any, timeout: Optional[float]) -> Any:
        try:
            return await method(request, timeout=self._deadline(timeout),
                                metadata=self._metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    async def _server_stream(self, method: Any, request: Any,
                             timeout: Optional[float]) -> AsyncIterator[Any]:
        call = method(request, timeout=self._deadline(timeout), metadata=self._metadata)
        try:
            async for message in call:
                yield message
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()  # no-op when finished; stops the server's work otherwise

    async def _write_stream(self, method: Any, requests: Any,
                            progress: Optional[ProgressCallback], timeout: Optional[float],
                            name: str) -> t.Document:
        result = None
        async for message in self._server_stream(method, requests, timeout):
            if progress is not None:
                outcome = progress(c.progress(message))
                if inspect.isawaitable(outcome):
                    await outcome
            if message.HasField("done"):
                result = c.document(self._pb, message.done)
        if result is None:
            raise c.missing_final(name)
        return result
