"""Fixtures for the store tests (the database URLs live in tests/conftest.py)."""
from __future__ import annotations

import pytest


@pytest.fixture
def store(store_url: str):
    """A migrated :class:`mutune.services.store.Store` on ``store_url``, closed afterwards."""
    from mutune.services.store import Store

    with Store.open(store_url) as opened:
        yield opened


# ---------------------------------------------------------------- the search server, for real
# `mutune serve` in a subprocess: real uvicorn on a free loopback port.

import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    """A running ``mutune serve``: its base URL, process, database URL and log file."""
    url: str
    proc: subprocess.Popen
    db: str
    log: Path

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the server process alone (not its children) and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)


def start_server(db: str, tmp: Path, *, worker: bool = False, env: dict | None = None,
                 timeout: float = 60.0, name: str = "server") -> LiveServer:
    """Start ``python -m mutune.services.cli serve`` on a free port and wait for /api/v1/health."""
    import httpx

    port = free_port()
    log = tmp / f"{name}-{port}.log"
    cmd = [sys.executable, "-m", "mutune.services.cli", "serve", "--host", "127.0.0.1", "--port",
           str(port), "--db", db, "--out", str(tmp / "server-out"), "--log-level", "warning"]
    if not worker:
        cmd.append("--no-worker")
    full_env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep
                + os.environ.get("PYTHONPATH", ""), "MUTUNE_TOKEN_CACHE_S": "0",
                **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                cwd=tmp)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mutune serve exited with {proc.returncode}: "
                               f"{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/api/v1/health", timeout=2).status_code == 200:
                return LiveServer(url, proc, db, log)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"mutune serve did not answer within {timeout} s: "
                       f"{log.read_text()[-3000:]}")


def make_token(db: str, project: str) -> str:
    """A fresh API token for ``project`` in ``db`` (what `mutune token create` does)."""
    from mutune.services.server.auth import create_token
    from mutune.services.store import Store

    with Store.open(db) as store:
        return create_token(store, project)[1]


@pytest.fixture
def live_server(store_url, tmp_path):
    """A `mutune serve --no-worker` on ``store_url`` (SQLite and PostgreSQL), stopped after."""
    server = start_server(store_url, tmp_path)
    try:
        yield server
    finally:
        server.kill(signal.SIGTERM)
