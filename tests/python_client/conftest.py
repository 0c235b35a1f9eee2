"""Fixtures of the Python client tests: real twice-server processes serving
the shipped tiny models, and throwaway TLS certificates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from server_process import MODELS, REPO, ServerProcess

sys.path.insert(0, str(REPO / "clients" / "python"))

import twice  # noqa: E402  (needs the path above)

#: Largest document the test servers accept, in tokens (the limit test goes
#: one past it; the token chunking test stays under it).
MAX_DOCUMENT_TOKENS = 100_000
DEFAULT_MODEL = "based-rt-f16"
JRT_MODEL = "jrt-qa"

ALICE = "alice-token-0123456789"
BOB = "bob-token-abcdefghijkl"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Plaintext, no authentication; the default model and a JRT model."""
    root = tmp_path_factory.mktemp("server")
    process = ServerProcess(
        root / "data",
        [f"--model={DEFAULT_MODEL}={MODELS / DEFAULT_MODEL},{JRT_MODEL}={MODELS / JRT_MODEL}",
         f"--max-document-tokens={MAX_DOCUMENT_TOKENS}"],
        root / "server.log")
    yield process
    assert process.stop() == 0, process.log()


@pytest.fixture(scope="session")
def client(server: ServerProcess) -> Iterator[twice.Client]:
    with twice.Client(server.address, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def eval_doc() -> Dict[str, object]:
    """A 128-token document of the CI eval set and its questions."""
    with open(REPO / "tests" / "data" / "eval" / "ci.jsonl") as f:
        return json.loads(f.readline())


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate,
    made by the openssl command (ca.pem, server.pem/.key, client.pem/.key)."""
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl("req", "-x509", "-nodes", "-days", "2", *ec, "-keyout", str(d / "ca.key"),
             "-out", str(d / "ca.pem"), "-subj", "/CN=twice-test-ca")
    for name in ("server", "client"):
        _openssl("req", "-nodes", *ec, "-keyout", str(d / f"{name}.key"),
                 "-out", str(d / f"{name}.csr"), "-subj", "/CN=127.0.0.1")
        _openssl("x509", "-req", "-days", "2", "-in", str(d / f"{name}.csr"),
                 "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"), "-CAcreateserial",
                 "-out", str(d / f"{name}.pem"), "-extfile", str(d / f"{name}.ext"))
    return d


@pytest.fixture(scope="session")
def tls_server(tmp_path_factory: pytest.TempPathFactory,
               certs: Path) -> Iterator[ServerProcess]:
    """mTLS (client certificates of the test CA required) and two tenants'
    bearer tokens."""
    root = tmp_path_factory.mktemp("tls-server")
    tokens = root / "tokens"
    tokens.write_text(f"{ALICE} alice\n{BOB} bob\n")
    args: List[str] = [
        f"--model={MODELS / DEFAULT_MODEL}", f"--auth-tokens-file={tokens}",
        f"--tls-cert={certs / 'server.pem'}", f"--tls-key={certs / 'server.key'}",
        f"--tls-client-ca={certs / 'ca.pem'}"]
    process = ServerProcess(root / "data", args, root / "server.log")
    yield process
    assert process.stop() == 0, process.log()
