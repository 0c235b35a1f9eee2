"""The asyncio Python client (twice.aio.Client) against a real twice-server:
every method, concurrent asks equal to sequential ones, async streaming."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, List, TypeVar

import grpc
import pytest

from conftest import DEFAULT_MODEL
from server_process import ServerProcess

import twice
import twice.aio

T = TypeVar("T")


def run(server: ServerProcess, body: Callable[[twice.aio.Client], Awaitable[T]]) -> T:
    """Runs ``body`` with a fresh asyncio client in a fresh event loop."""
    async def main() -> T:
        async with twice.aio.Client(server.address, timeout=60) as client:
            return await body(client)
    return asyncio.run(main())


def test_every_method(server: ServerProcess, eval_doc: Dict) -> None:
    async def body(client: twice.aio.Client) -> None:
        assert await client.health() == "SERVING"
        assert [m.name for m in await client.models() if m.is_default] == [DEFAULT_MODEL]

        seen: List[twice.Progress] = []

        async def on_progress(p: twice.Progress) -> None:  # a coroutine callback
            seen.append(p)

        doc = await client.ingest(eval_doc["text"], doc_id="aio-doc", segment_tokens=32,
                                  progress=on_progress)
        assert doc.tokens == 128 and len(doc.segments) == 4
        assert len(seen) >= 2 and seen[-1].done and seen[-1].tokens_done == 128

        q = eval_doc["questions"][0]["question"]
        unary = await client.ask(doc, q, max_tokens=6)
        assert unary.text.split()[0] == eval_doc["questions"][0]["answer"]
        assert unary.usage.tokens_reused == 128
        items: List[Any] = [item async for item in client.ask_stream(doc, q, max_tokens=6)]
        assert isinstance(items[-1], twice.Answer)
        assert "".join(items[:-1]) == items[-1].text == unary.text
        assert items[-1].tokens == unary.tokens

        answers = await client.batch_ask(doc, [q, twice.Question(q, mode="read_twice")],
                                         max_tokens=6)
        assert answers[0].text == unary.text
        assert answers[1].usage.tokens_prefilled > doc.tokens

        longer = await client.append(doc, tokens=[7, 8, 9])
        assert longer.tokens == 131
        assert (await client.pin(doc)).pinned
        assert (await client.document("aio-doc")).pinned
        assert "aio-doc" in [d.document_id async for d in client.documents(page_size=1)]
        assert await client.delete(doc) >= 1
        with pytest.raises(twice.NotFound) as error:
            await client.document(doc)
        assert error.value.code == grpc.StatusCode.NOT_FOUND

    run(server, body)


def test_concurrent_asks_equal_sequential_ones(client: twice.Client, server: ServerProcess,
                                               eval_doc: Dict) -> None:
    doc = client.ingest(eval_doc["text"], doc_id="aio-concurrent")
    questions = [q["question"] for q in eval_doc["questions"]]
    asks = [(q, mode) for q in questions for mode in ("default", "read_twice")] * 3
    expected = [client.ask(doc, q, mode=mode, max_tokens=8).tokens for q, mode in asks]

    async def body(aio: twice.aio.Client) -> List[twice.Answer]:
        return list(await asyncio.gather(
            *(aio.ask(doc.document_id, q, mode=mode, max_tokens=8) for q, mode in asks)))

    answers = run(server, body)
    assert [a.tokens for a in answers] == expected
    client.delete(doc)


def test_errors(server: ServerProcess) -> None:
    async def body(client: twice.aio.Client) -> None:
        with pytest.raises(twice.NotFound):
            await client.ask("no-such-doc", "what is vokan ?")
        with pytest.raises(twice.NotFound):
            async for _ in client.ask_stream("no-such-doc", "what is vokan ?"):
                pass
        with pytest.raises(twice.InvalidArgument, match="segment_tokens"):
            await client.ingest("vokan is tazex .", segment_tokens=3)

    run(server, body)

