"""A real twice-server as a child process, for the Python client tests.

The binary is ``$TWICE_SERVER_BINARY``, else ``$TWICE_BINARY_DIR/services/
twice-server`` (ctest sets TWICE_BINARY_DIR), else the source tree's
``build/services/twice-server``. The server listens on ``127.0.0.1:0`` and
prints the port it got; its store lives in a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
_LISTENING = "twice-server listening on "


def server_binary() -> Path:
    configured = os.environ.get("TWICE_SERVER_BINARY")
    if configured:
        return Path(configured)
    binary_dir = os.environ.get("TWICE_BINARY_DIR")
    return Path(binary_dir or REPO / "build") / "services" / "twice-server"


class ServerProcess:
    """``twice-server --role=all`` on a free loopback port.

    Args:
        data_dir: the store's directory (created by the server).
        args: extra flags (models, TLS, tokens, limits).
        log_path: the server's stderr goes here.
    """

    def __init__(self, data_dir: Path, args: Sequence[str], log_path: Path,
                 start_timeout: float = 30.0) -> None:
        binary = server_binary()
        if not binary.is_file():
            raise FileNotFoundError(
                f"{binary} not found: build it, or set TWICE_SERVER_BINARY")
        self.log_path = log_path
        command: List[str] = [str(binary), "--role=all", "--listen=127.0.0.1:0",
                              f"--data-dir={data_dir}", "--sync-writes=false", *args]
        self._log = open(log_path, "ab")
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._log,
                                         stdin=subprocess.DEVNULL)
        self.address = self._read_address(start_timeout)

    def _read_address(self, timeout: float) -> str:
        assert self._process.stdout is not None
        line: List[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self._process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        text = line[0].decode(errors="replace").strip() if line else ""
        if not text.startswith(_LISTENING):
            self.stop()
            raise RuntimeError(f"twice-server did not start ({text!r}); log:\n{self.log()}")
        return text[len(_LISTENING):]

    def log(self) -> str:
        """The server's stderr so far (its last 4,000 characters)."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> Optional[int]:
        """SIGTERM, then SIGKILL after 20 s; returns the exit code."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._log.close()
        return self._process.returncode

