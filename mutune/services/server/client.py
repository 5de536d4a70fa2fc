"""The Python client of the search server (``mutune.Client``, ``mutune.submit``): server errors
become typed exceptions carrying its message (422 → :class:`mutune.errors.ConfigError`).

    client = mutune.Client("http://127.0.0.1:8765", token="...")
    client.submit("configs/quickstart.yaml").wait(timeout=3600)"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from mutune.errors import ConfigError, MutuneError

__all__ = ["Client", "SweepHandle", "submit", "ServerError", "AuthError", "NotFound",
           "Conflict", "PayloadTooLarge", "SweepTimeout", "DEFAULT_URL"]

#: Where :func:`submit` looks when neither ``url`` nor env ``MUTUNE_URL`` is given.
DEFAULT_URL = "http://127.0.0.1:8765"
_ENDED = ("completed", "failed", "cancelled")


class ServerError(MutuneError):
    """The server answered an error; ``status`` is the HTTP status, the message is its own."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class AuthError(ServerError):
    """401: no token, or an invalid or revoked one."""


class NotFound(ServerError):
    """404: no such sweep in the token's project."""


class Conflict(ServerError):
    """409: the sweep is not in a state that allows this (e.g. the report of a running one)."""


class PayloadTooLarge(ServerError):
    """413: the config is over the server's body size limit."""


class SweepTimeout(MutuneError, TimeoutError):
    """:meth:`SweepHandle.wait` ran out of time; the sweep goes on on the server."""


_BY_STATUS = {401: AuthError, 404: NotFound, 409: Conflict, 413: PayloadTooLarge}


def _raise_for(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        detail = resp.json().get("detail")
    except (ValueError, AttributeError):
        detail = resp.text
    if resp.status_code == 422:
        if isinstance(detail, dict):
            raise ConfigError(detail.get("message", str(detail)), detail.get("errors"))
        errors = [{"field": ".".join(str(p) for p in d.get("loc", [])),
                   "value": repr(d.get("input")), "rule": d.get("msg", "")}
                  for d in detail] if isinstance(detail, list) else []
        raise ConfigError("; ".join(f"{e['field']} = {e['value']}: {e['rule']}"
                                    for e in errors) or str(detail), errors)
    cls = _BY_STATUS.get(resp.status_code, ServerError)
    text = detail if isinstance(detail, str) else json.dumps(detail)
    raise cls(f"{resp.status_code} from {resp.request.method} {resp.request.url.path}: {text}",
              resp.status_code)


class Client:
    """A connection to a mutune search server; ``timeout`` is seconds per HTTP request."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url + "/api/v1", timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.HTTPError as err:
            raise ServerError(f"cannot reach the mutune server at {self.url}: {err}", 0) \
                from err
        _raise_for(resp)
        return resp.json()

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def submit(self, config: Any) -> SweepHandle:
        """Queue a sweep from a YAML/JSON path, a :class:`mutune.SweepConfig` or a mapping;
        returns its
        :class:`SweepHandle`.

        Raises:
            ConfigError: the server rejected the config, or the file cannot be read. AuthError,
                PayloadTooLarge, ServerError."""
        if isinstance(config, (str, os.PathLike)):
            try:
                body = Path(config).read_bytes()
            except OSError as err:
                raise ConfigError(f"cannot read sweep config {config}: {err.strerror}") \
                    from None
            kw: dict[str, Any] = {"content": body,
                                  "headers": {"Content-Type": "application/yaml"}}
        elif hasattr(config, "model_dump"):
            kw = {"json": config.model_dump(mode="json")}
        elif isinstance(config, Mapping):
            kw = {"json": dict(config)}
        else:
            raise ConfigError(f"config = {type(config).__name__}: give a file path, a "
                              "SweepConfig or a mapping")
        out = self._call("POST", "/sweeps", **kw)
        return SweepHandle(self, int(out["id"]))

    def sweep(self, sweep_id: int) -> SweepHandle:
        """A handle on an existing sweep (no request is made)."""
        return SweepHandle(self, int(sweep_id))

    def sweeps(self, *, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """One page of the project's sweeps: {"items", "total", "offset", "limit"}."""
        return self._call("GET", "/sweeps", params={"offset": offset, "limit": limit})


class SweepHandle:
    """One submitted sweep on the server; ``id`` is its id in the results database."""

    def __init__(self, client: Client, sweep_id: int) -> None:
        self.client, self.id = client, sweep_id

    def __repr__(self) -> str:
        return f"SweepHandle(id={self.id}, url={self.client.url!r})"

    def status(self) -> dict[str, Any]:
        """{"id", "status", "progress": {..., "fraction"}, "best_so_far", "target", ...}."""
        return self.client._call("GET", f"/sweeps/{self.id}")

    def trials(self) -> list[dict[str, Any]]:
        """Every trial: id, kind, width, config, status, steps, seconds, last_val_loss."""
        return self.client._call("GET", f"/sweeps/{self.id}/trials")["items"]

    def report(self) -> dict[str, Any]:
        """report.json of the completed sweep (docs/architecture.md §11); Conflict until then."""
        return self.client._call("GET", f"/sweeps/{self.id}/report")

    def cancel(self) -> dict[str, Any]:
        """Cancel it: {"id", "status"}; Conflict if it already ended."""
        return self.client._call("POST", f"/sweeps/{self.id}/cancel")

    def wait(self, timeout: float | None = None, *, poll_s: float = 1.0,
             progress: bool = True) -> dict[str, Any]:
        """Poll every ``poll_s`` seconds until the sweep ends; returns its final status.

        Raises:
            SweepTimeout: still running after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = task = None
        if progress:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            bar = Progress(TextColumn(f"sweep {self.id} {{task.fields[state]}}"), BarColumn(),
                           TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                           console=Console(stderr=True), transient=False)
            bar.start()
            task = bar.add_task("sweep", total=1.0, state="queued")
        try:
            while True:
                st = self.status()
                if bar is not None:
                    bar.update(task, completed=st["progress"]["fraction"], state=st["status"])
                if st["status"] in _ENDED:
                    return st
                if deadline is not None and time.monotonic() >= deadline:
                    raise SweepTimeout(f"sweep {self.id} is still {st['status']} after "
                                       f"{timeout} s")
                time.sleep(poll_s if deadline is None
                           else max(min(poll_s, deadline - time.monotonic()), 0.0))
        finally:
            if bar is not None:
                bar.stop()


def submit(config: Any, *, url: str | None = None, token: str | None = None) -> SweepHandle:
    """Queue a sweep on the server at ``url`` (env ``MUTUNE_URL``) with ``token`` (env
    ``MUTUNE_TOKEN``); see :meth:`Client.submit`. AuthError without a token."""
    token = token or os.environ.get("MUTUNE_TOKEN")
    if not token:
        raise AuthError("no API token: pass token= or set MUTUNE_TOKEN (create one with "
                        "`mutune token create --project NAME`)", 401)
    return Client(url or os.environ.get("MUTUNE_URL") or DEFAULT_URL, token).submit(config)
