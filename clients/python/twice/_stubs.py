"""Generates and imports the Python stubs of the Twice protos.

The stubs are not committed: they are generated from ``proto/`` with
``protoc`` and gRPC's Python plugin (Debian's ``protobuf-compiler-grpc``) the
first time the package needs them, into a directory named by the SHA-256 of
the proto files and the tools' versions. A changed proto or compiler gets
a new directory, so stale stubs are never imported; concurrent processes
each generate into a private directory and rename it into place, so they
never see a half-written one.

Where things are found:

- protos: ``$TWICE_PROTO_DIR``, else the ``proto/`` directory of the Twice
  source tree this package sits in (``clients/python/twice`` → ``proto``);
- tools: ``$TWICE_PROTOC`` (default ``protoc`` on ``PATH``) and
  ``$TWICE_GRPC_PYTHON_PLUGIN`` (default ``grpc_python_plugin`` on ``PATH``);
- output: ``$TWICE_STUBS_DIR``, else ``clients/python/build/stubs`` when the
  tree is writable, else ``$XDG_CACHE_HOME/twice/python-stubs``.

The generated code imports its siblings as ``twice.v1.*``, the proto
package's name, which is also this package's name. So ``twice.v1`` is made
a package whose ``__path__`` is the generated ``twice/v1`` directory.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import NamedTuple

# The protos the public API needs, relative to the proto root.
_PROTOS = (
    "twice/v1/common.proto",
    "twice/v1/orchestrator.proto",
    "grpc/health/v1/health.proto",
)

_PACKAGE_DIR = Path(__file__).resolve().parent
_lock = threading.Lock()
_loaded: "Stubs | None" = None


class StubsError(RuntimeError):
    """The stubs could not be generated (no protos, no protoc, ...)."""


class Stubs(NamedTuple):
    """The generated modules."""

    common_pb2: types.ModuleType
    orchestrator_pb2: types.ModuleType
    orchestrator_pb2_grpc: types.ModuleType
    health_pb2: types.ModuleType
    directory: Path


def proto_dir() -> Path:
    """The directory holding ``twice/v1/*.proto``."""
    configured = os.environ.get("TWICE_PROTO_DIR")
    candidates = [Path(configured)] if configured else [
        parent / "proto" for parent in _PACKAGE_DIR.parents]
    for candidate in candidates:
        if (candidate / "twice/v1/orchestrator.proto").is_file():
            return candidate
    raise StubsError(
        "cannot find twice/v1/orchestrator.proto: set TWICE_PROTO_DIR to the "
        "proto/ directory of the Twice source tree")


def _tool(env: str, name: str) -> str:
    configured = os.environ.get(env)
    found = configured or shutil.which(name)
    if not found:
        raise StubsError(
            f"{name} not found: install Debian's protobuf-compiler and "
            f"protobuf-compiler-grpc, or set {env}")
    return found


def _version(tool: str) -> bytes:
    try:
        run = subprocess.run([tool, "--version"], capture_output=True, check=False)
        return run.stdout + run.stderr
    except OSError:
        return b""


def _output_root() -> Path:
    configured = os.environ.get("TWICE_STUBS_DIR")
    if configured:
        return Path(configured)
    in_tree = _PACKAGE_DIR.parent / "build" / "stubs"
    try:
        in_tree.mkdir(parents=True, exist_ok=True)
        if os.access(in_tree, os.W_OK):
            return in_tree
    except OSError:
        pass
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "twice" / "python-stubs"


def generate() -> Path:
    """Generates the stubs unless current ones exist; returns their directory.

    Raises:
        StubsError: protos or tools are missing, or protoc failed.
    """
    protos = proto_dir()
    protoc = _tool("TWICE_PROTOC", "protoc")
    plugin = _tool("TWICE_GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    digest = hashlib.sha256()
    for name in _PROTOS:
        digest.update(name.encode() + b"\0" + (protos / name).read_bytes() + b"\0")
    digest.update(_version(protoc))
    digest.update(Path(plugin).resolve().as_posix().encode())
    root = _output_root()
    target = root / digest.hexdigest()[:16]
    if (target / "COMPLETE").is_file():
        return target

    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    try:
        command = [
            protoc, f"-I{protos}", f"--python_out={scratch}",
            f"--grpc_python_out={scratch}",
            f"--plugin=protoc-gen-grpc_python={plugin}", *_PROTOS,
        ]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise StubsError(f"protoc failed ({' '.join(command)}):\n{run.stderr}")
        (scratch / "COMPLETE").write_text("\n".join(command) + "\n")
        try:
            scratch.rename(target)
        except OSError:
            # Another process renamed its copy first; it is as good as ours.
            if not (target / "COMPLETE").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load() -> Stubs:
    """Generates the stubs when needed and imports them (once per process)."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        directory = generate()
        # `twice.v1` is the generated package (see the module docstring).
        package = types.ModuleType("twice.v1")
        package.__path__ = [str(directory / "twice" / "v1")]
        package.__package__ = "twice.v1"
        sys.modules["twice.v1"] = package
        common = importlib.import_module("twice.v1.common_pb2")
        orchestrator = importlib.import_module("twice.v1.orchestrator_pb2")
        orchestrator_grpc = importlib.import_module("twice.v1.orchestrator_pb2_grpc")
        # grpc.health.v1 would collide with the grpc package: load the file
        # under a private name.
        health = _load_file(
            "twice._health_pb2", directory / "grpc" / "health" / "v1" / "health_pb2.py")
        _loaded = Stubs(common, orchestrator, orchestrator_grpc, health, directory)
        return _loaded
