"""The Python client over mutual TLS with tenants' bearer tokens, against a
real twice-server started with --tls-cert, --tls-client-ca and
--auth-tokens-file (certificates made by the openssl command)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import ALICE, BOB
from server_process import ServerProcess

import twice
import twice.aio


def tls(certs: Path, client_cert: bool = True) -> twice.TlsOptions:
    if not client_cert:
        return twice.TlsOptions(ca=certs / "ca.pem")
    return twice.TlsOptions(ca=str(certs / "ca.pem"), cert=certs / "client.pem",
                            key=certs / "client.key")


def test_tenant_token_over_mtls(tls_server: ServerProcess, certs: Path) -> None:
    with twice.Client(tls_server.address, token=ALICE, tls=tls(certs), timeout=30) as alice:
        assert alice.health() == "SERVING"
        doc = alice.ingest("vokan is tazex . suden is sakux .", doc_id="secret")
        answer = alice.ask(doc, "what is vokan ?", max_tokens=2)
        assert answer.usage.tokens_reused == doc.tokens
        assert [d.document_id for d in alice.documents()] == ["secret"]

    # Bob's tenant does not see Alice's document.
    with twice.Client(tls_server.address, token=BOB, tls=tls(certs), timeout=30) as bob:
        with pytest.raises(twice.NotFound):
            bob.document("secret")
        assert list(bob.documents()) == []


def test_pem_bytes_and_asyncio(tls_server: ServerProcess, certs: Path) -> None:
    options = twice.TlsOptions(ca=(certs / "ca.pem").read_bytes(),
                               cert=(certs / "client.pem").read_bytes(),
                               key=(certs / "client.key").read_bytes())

    async def main() -> twice.Answer:
        async with twice.aio.Client(tls_server.address, token=BOB, tls=options,
                                    timeout=30) as bob:
            doc = await bob.ingest("kanon is tonex .", doc_id="bobs")
            answers = await asyncio.gather(
                *(bob.ask(doc, "what is kanon ?", max_tokens=2) for _ in range(4)))
            assert len({a.tokens for a in answers}) == 1
            await bob.delete(doc)
            return answers[0]

    assert asyncio.run(main()).usage.tokens_decoded >= 1


def test_missing_or_wrong_token_is_unauthenticated(tls_server: ServerProcess,
                                                   certs: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TWICE_TOKEN", raising=False)
    for token in (None, "not-a-token-of-anyone"):
        with twice.Client(tls_server.address, token=token, tls=tls(certs),
                          timeout=30) as client:
            with pytest.raises(twice.Unauthenticated) as error:
                client.models()
            assert "Bearer" in error.value.message or "credentials" in error.value.message
    # $TWICE_TOKEN is the default token, as for the twice CLI.
    monkeypatch.setenv("TWICE_TOKEN", ALICE)
    with twice.Client(tls_server.address, tls=tls(certs), timeout=30) as client:
        doc = client.ingest("suden is sakux .", doc_id="by-env-token")
        assert doc.document_id in [d.document_id for d in client.documents()]
        client.delete(doc)


def test_no_client_certificate_or_no_tls_is_refused(tls_server: ServerProcess,
                                                    certs: Path) -> None:
    with twice.Client(tls_server.address, token=ALICE, tls=tls(certs, client_cert=False),
                      timeout=10) as client:
        with pytest.raises(twice.Unavailable):
            client.models()
    with twice.Client(tls_server.address, token=ALICE, timeout=10) as plaintext:
        with pytest.raises(twice.Unavailable):
            plaintext.models()

