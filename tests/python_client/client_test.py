"""The blocking Python client (clients/python/twice) against a real
twice-server serving the shipped tiny models: every method, the upload
chunking, streamed against unary answers, and the error mapping."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import grpc
import pytest

from conftest import DEFAULT_MODEL, JRT_MODEL, MAX_DOCUMENT_TOKENS
from server_process import REPO, ServerProcess

import twice
import twice._stubs
from twice import _convert

VOCAB = 114  # the shipped models' word-level vocabulary


@pytest.fixture(scope="module")
def doc(client: twice.Client, eval_doc: Dict) -> twice.Document:
    return client.ingest(eval_doc["text"], segment_tokens=32)


def question(eval_doc: Dict, i: int = 0) -> str:
    return eval_doc["questions"][i]["question"]


def test_health_and_models(client: twice.Client) -> None:
    assert client.health() == "SERVING"
    models = {m.name: m for m in client.models()}
    assert set(models) == {DEFAULT_MODEL, JRT_MODEL}
    assert models[DEFAULT_MODEL].is_default and not models[JRT_MODEL].is_default
    assert models[DEFAULT_MODEL].vocab_size == VOCAB
    assert models[DEFAULT_MODEL].training_context == 128
    assert twice.Mode.READ_TWICE in models[DEFAULT_MODEL].modes
    assert twice.Mode.PREFIX in models[JRT_MODEL].modes
    assert twice.Mode.PREFIX not in models[DEFAULT_MODEL].modes


def test_ingest_reports_progress_and_repeats_for_free(client: twice.Client,
                                                      eval_doc: Dict) -> None:
    text = eval_doc["text"] + " extra words ."
    seen: List[twice.Progress] = []
    doc = client.ingest(text, segment_tokens=32, progress=seen.append)
    assert doc.tokens == len(text.split())  # the tokenizer splits on whitespace
    assert doc.model == DEFAULT_MODEL
    assert [s.end_token for s in doc.segments] == [32, 64, 96, 128, doc.tokens]
    assert doc.text_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert len(seen) >= 2 and seen[-1].done and not any(p.done for p in seen[:-1])
    done = [p.tokens_done for p in seen]
    assert done == sorted(done) and done[-1] == doc.tokens
    assert seen[-1].segments_total == 5 and seen[-1].segments_reused == 0

    again: List[twice.Progress] = []
    repeated = client.ingest(text, segment_tokens=32, progress=again.append)
    assert repeated.document_id == doc.document_id
    assert again[-1].segments_reused == 5
    assert client.document(doc).segments == doc.segments


def test_ingest_from_path_is_the_same_document(client: twice.Client, doc: twice.Document,
                                               eval_doc: Dict, tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_text(eval_doc["text"])
    from_path = client.ingest(path=path, segment_tokens=32)
    assert from_path.document_id == doc.document_id  # ids derive from the tokens
    assert from_path.text_sha256 == doc.text_sha256


def test_text_is_chunked_on_character_boundaries(client: twice.Client) -> None:
    # 2.5 MiB of text, three messages, with a 2-byte and a 4-byte character
    # across the 1 MiB and 2 MiB marks; whitespace keeps the tokens few.
    mib = _convert.TEXT_CHUNK_BYTES
    head = "vokan is tazex ."
    text = head + " " * (mib - 1 - len(head)) + "é" + " " * (mib - 3) + "😀"
    text += " " * (mib // 2) + "suden is sakux ."
    data = text.encode()
    assert data[mib - 1:mib + 1] == "é".encode()
    assert data[2 * mib - 2:2 * mib + 2] == "😀".encode()
    pieces = list(_convert.utf8_pieces(data, mib))
    assert len(pieces) == 3 and "".join(pieces) == text
    assert all(len(p.encode()) <= mib for p in pieces)

    pb = twice._stubs.load()
    requests = list(_convert.ingest_requests(
        pb, _convert.make_payload(text=text), document_id=None, model=None,
        segment_tokens=None, pin=False, prepare_prefix=False))
    assert [r.HasField("header") for r in requests] == [True, False, False]
    assert requests[0].header.total_size == len(data)
    assert max(r.ByteSize() for r in requests) < mib + 1024

    doc = client.ingest(text, doc_id="chunked-text")
    assert doc.text_sha256 == hashlib.sha256(data).hexdigest()  # every byte arrived
    assert doc.tokens == len(text.split())
    client.delete(doc)


def test_token_ids_are_chunked(client: twice.Client) -> None:
    # Over 64 Ki ids: two messages.
    rng = random.Random(7)
    ids = [rng.randrange(4, VOCAB) for _ in range(_convert.TOKEN_CHUNK + 500)]
    pb = twice._stubs.load()
    requests = list(_convert.ingest_requests(
        pb, _convert.make_payload(tokens=ids), document_id="x", model=None,
        segment_tokens=None, pin=False, prepare_prefix=False))
    assert [len(r.tokens) for r in requests] == [_convert.TOKEN_CHUNK, 500]
    assert requests[0].header.total_size == len(ids)
    appends = list(_convert.append_requests(pb, _convert.make_payload(tokens=ids),
                                            document_id="x", segment_tokens=None))
    assert [a.document_id for a in appends] == ["x", ""]

    doc = client.ingest(tokens=ids, doc_id="chunked-tokens", segment_tokens=8192)
    assert doc.tokens == len(ids) and doc.text_sha256 == ""
    assert [s.end_token for s in doc.segments][-1] == len(ids)
    answer = client.ask(doc, [7, 8, 9], max_tokens=2, ignore_eos=True)  # token ids
    assert answer.usage.tokens_decoded == 2
    client.delete(doc)


def test_ask_modes_and_usage(client: twice.Client, doc: twice.Document,
                             eval_doc: Dict) -> None:
    q = question(eval_doc)
    default = client.ask(doc, q, max_tokens=4)
    assert default.text.split()[0] == eval_doc["questions"][0]["answer"]
    assert default.finish_reason in ("length", "eos", "stop")
    assert default.usage.tokens_reused == doc.tokens and default.usage.states_reused >= 1
    assert 0 < default.usage.tokens_prefilled < doc.tokens  # the question only
    assert default.usage.tokens_decoded == len(default.tokens) > 0

    twice_read = client.ask(doc, q, mode=twice.Mode.READ_TWICE, max_tokens=4)
    assert twice_read.usage.tokens_reused == doc.tokens
    assert twice_read.usage.tokens_prefilled > doc.tokens  # question + document again

    full = client.ask(doc, q, mode="read_twice_full", max_tokens=4)
    assert full.usage.tokens_reused == 0
    assert full.usage.tokens_prefilled > 2 * doc.tokens


def test_stream_equals_unary(client: twice.Client, doc: twice.Document,
                             eval_doc: Dict) -> None:
    for mode in ("default", "read_twice"):
        for i in range(2):
            unary = client.ask(doc, question(eval_doc, i), mode=mode, max_tokens=6)
            items = list(client.ask_stream(doc, question(eval_doc, i), mode=mode,
                                           max_tokens=6))
            final = items[-1]
            assert isinstance(final, twice.Answer)
            assert all(isinstance(p, str) for p in items[:-1]) and len(items) > 2
            assert "".join(items[:-1]) == final.text == unary.text
            assert final.tokens == unary.tokens
            assert final.finish_reason == unary.finish_reason
            assert final.usage.tokens_prefilled == unary.usage.tokens_prefilled


def test_stream_stopped_early(client: twice.Client, doc: twice.Document,
                              eval_doc: Dict) -> None:
    stream = client.ask_stream(doc, question(eval_doc), max_tokens=32, ignore_eos=True)
    assert isinstance(next(stream), str)
    stream.close()  # cancels the call
    assert client.health() == "SERVING"


def test_batch_ask_matches_single_asks(client: twice.Client, doc: twice.Document,
                                       eval_doc: Dict) -> None:
    q0, q1 = question(eval_doc, 0), question(eval_doc, 1)
    answers = client.batch_ask(
        doc, [q0, q1, twice.Question(q1, mode="read_twice"),
              twice.Question(q0, sampling=twice.Sampling(max_tokens=2, ignore_eos=True))],
        max_tokens=5)
    assert len(answers) == 4
    assert answers[0].text == client.ask(doc, q0, max_tokens=5).text
    assert answers[1].text == client.ask(doc, q1, max_tokens=5).text
    assert answers[2].text == client.ask(doc, q1, mode="read_twice", max_tokens=5).text
    assert answers[2].usage.tokens_prefilled > doc.tokens
    assert answers[3].usage.tokens_decoded == 2


def test_sampling_options(client: twice.Client, doc: twice.Document, eval_doc: Dict) -> None:
    q = question(eval_doc)
    capped = client.ask(doc, q, max_tokens=5, ignore_eos=True)
    assert capped.usage.tokens_decoded == 5 and capped.finish_reason == "length"
    sampled = [client.ask(doc, q, max_tokens=8, temperature=1.5, top_k=50, top_p=0.95,
                          seed=11, ignore_eos=True) for _ in range(2)]
    assert sampled[0].tokens == sampled[1].tokens  # same seed, same answer
    first_word = capped.text.split()[0]
    stopped = client.ask(doc, q, max_tokens=8, stop=[first_word])
    assert stopped.finish_reason == "stop" and first_word not in stopped.text


def test_as_of_tokens_answers_over_a_prefix(client: twice.Client, doc: twice.Document,
                                            eval_doc: Dict) -> None:
    # Answering as of token 80 (resume at 64, read 16 more) equals answering
    # over a document of those 80 tokens.
    prefix = client.ingest(" ".join(eval_doc["text"].split()[:80]), segment_tokens=32)
    for i in range(2):
        as_of = client.ask(doc, question(eval_doc, i), as_of_tokens=80, max_tokens=4)
        whole = client.ask(prefix, question(eval_doc, i), max_tokens=4)
        assert as_of.tokens == whole.tokens
        assert as_of.usage.tokens_reused == 64
    client.delete(prefix)


def test_append_text_and_tokens(client: twice.Client, eval_doc: Dict) -> None:
    base = client.ingest(eval_doc["text"], doc_id="append-me", segment_tokens=32)
    seen: List[twice.Progress] = []
    longer = client.append(base, " kanon is tonex .", progress=seen.append)
    assert longer.tokens == base.tokens + 4 and longer.text_sha256 == ""
    assert seen and seen[-1].done
    longest = client.append("append-me", tokens=[7, 8, 9], segment_tokens=16)
    assert longest.tokens == longer.tokens + 3
    assert client.document("append-me").tokens == longest.tokens
    client.delete("append-me")


def test_documents_pages_pin_and_delete(client: twice.Client) -> None:
    # Distinct in-vocabulary words: documents of equal tokens share states.
    words = ["river", "town", "hill", "stone", "moon"]
    ids = [f"page-{word}" for word in words]
    for word, doc_id in zip(words, ids):
        client.ingest(f"vokan is tazex . {word} .", doc_id=doc_id)
    listed = [d.document_id for d in client.documents(page_size=2)]
    assert len(listed) == len(set(listed))  # no page repeats one
    assert set(ids) <= set(listed)

    assert client.pin(ids[0]).pinned
    assert client.document(ids[0]).pinned
    assert not client.pin(ids[0], pinned=False).pinned
    pinned = client.ingest("vokan is tazex . sky .", doc_id="pinned", pin=True)
    assert pinned.pinned

    for doc_id in ids + ["pinned"]:
        assert client.delete(doc_id) >= 1
        with pytest.raises(twice.NotFound):
            client.document(doc_id)
    assert not set(ids) & {d.document_id for d in client.documents()}


def test_prefix_mode_on_a_jrt_model(client: twice.Client, eval_doc: Dict) -> None:
    doc = client.ingest(eval_doc["text"], model=JRT_MODEL, doc_id="jrt-doc")
    assert doc.model == JRT_MODEL and "prefix" in doc.prepared_modes
    prefix = client.ask(doc, question(eval_doc), mode=twice.Mode.PREFIX, max_tokens=3)
    assert prefix.usage.tokens_prefilled < doc.tokens  # the prefix state was prepared
    with_question = client.ask(doc, question(eval_doc), mode="prefix_with_question",
                               max_tokens=3)
    assert with_question.usage.tokens_prefilled > doc.tokens
    client.delete(doc)


def test_server_errors_map_to_exceptions(client: twice.Client, doc: twice.Document,
                                         eval_doc: Dict, server: ServerProcess) -> None:
    with pytest.raises(twice.NotFound) as missing:
        client.ask("no-such-doc", "what is vokan ?")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    assert "no-such-doc" in missing.value.message
    assert isinstance(missing.value, twice.TwiceError)
    with pytest.raises(twice.NotFound):
        client.document("no-such-doc")
    with pytest.raises(twice.NotFound):
        list(client.ask_stream("no-such-doc", "what is vokan ?"))
    with pytest.raises(twice.NotFound):
        client.append("no-such-doc", "more .")

    with pytest.raises(twice.InvalidArgument) as bad_segment:
        client.ingest("vokan is tazex .", segment_tokens=5)
    assert bad_segment.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "segment_tokens" in bad_segment.value.message
    with pytest.raises(twice.InvalidArgument, match="as_of_tokens"):
        client.ask(doc, "what is vokan ?", as_of_tokens=doc.tokens + 1)
    with pytest.raises(twice.InvalidArgument):
        client.ingest("   ")  # no tokens
    with pytest.raises(twice.InvalidArgument):
        client.ingest(tokens=[1, 2, VOCAB + 5])  # beyond the vocabulary
    with pytest.raises(twice.InvalidArgument):
        client.batch_ask(doc, ["what is vokan ?"], as_of_tokens=doc.tokens + 1)

    with pytest.raises(twice.AlreadyExists):
        client.ingest("different content .", doc_id=doc.document_id)
    with pytest.raises(twice.ResourceExhausted, match="max_document_tokens"):
        client.ingest(tokens=[7] * (MAX_DOCUMENT_TOKENS + 1))
    with pytest.raises(twice.DeadlineExceeded):
        client.ask(doc, "what is vokan ?", max_tokens=64, ignore_eos=True, timeout=1e-4)
    with pytest.raises(twice.Unimplemented):  # a Based model has no prefix encoder
        client.ask(doc, "what is vokan ?", mode="prefix")


def test_unreachable_server_is_unavailable() -> None:
    with twice.Client("127.0.0.1:1", timeout=5) as nowhere:
        with pytest.raises(twice.Unavailable) as error:
            nowhere.health()
    assert error.value.code == grpc.StatusCode.UNAVAILABLE


def test_arguments_checked_before_calling(client: twice.Client, tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        client.ingest("text", tokens=[1, 2])
    with pytest.raises(TypeError):
        client.ingest()
    with pytest.raises(ValueError):
        client.ask("any", "question", mode="sideways")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("vokan is caf\u00e9 .".encode("latin-1"))
    with pytest.raises(twice.InvalidArgument, match="not UTF-8"):
        client.ingest(path=latin1)
    with pytest.raises(FileNotFoundError):
        client.ingest(path=tmp_path / "absent.txt")


def test_module_runs_from_a_fresh_checkout(server: ServerProcess, tmp_path: Path) -> None:
    # No stubs yet: `python3 -m twice` generates them, then answers.
    env = dict(os.environ, TWICE_STUBS_DIR=str(tmp_path / "stubs"))
    env.pop("TWICE_TOKEN", None)
    for command, expected in (("health", "SERVING"), ("models", DEFAULT_MODEL)):
        run = subprocess.run(
            [sys.executable, "-m", "twice", command, f"--server={server.address}"],
            cwd=REPO / "clients" / "python", env=env, capture_output=True, text=True,
            timeout=60)
        assert run.returncode == 0, run.stderr
        assert expected in run.stdout
    assert list((tmp_path / "stubs").glob("*/COMPLETE"))



def test_doc_qa_example(server: ServerProcess, eval_doc: Dict, tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_text(eval_doc["text"])
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "doc_qa.py"), str(path),
         "-q", question(eval_doc), f"--server={server.address}", "--max-tokens=4"],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "[   default]" in run.stdout and "[read_twice]" in run.stdout
    assert "reused=128" in run.stdout
