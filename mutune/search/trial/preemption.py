"""Preemption notices for a training loop (spot capacity: finish the step, checkpoint, end).

Sources: SIGTERM (installed in the actor's main thread under Ray), a notice file, a polled URL
(AWS ``status`` or GCP ``body`` style), Ray draining the node. Polled ones are edge-triggered."""
from __future__ import annotations

import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["Preemption", "PreemptibleTrainable", "NoticeWatcher", "notice", "install_sigterm"]

#: the worker process's notice: set by SIGTERM or a watcher, checked by the loop
_NOTICE = threading.Event()
_REASON: list[str] = []
#: the SIGTERM handler that was there before mutune's (installed once per process)
_INSTALLED: list[Any] = []


def notice(reason: str) -> None:
    """Post a preemption notice to every loop of this process (``reason`` is kept)."""
    _REASON.append(reason)
    _NOTICE.set()


def _on_sigterm(signum: int, frame: Any) -> None:
    if _NOTICE.is_set() and _INSTALLED and callable(_INSTALLED[0]):
        _INSTALLED[0](signum, frame)      # a second SIGTERM: the previous handler's turn
        return
    notice("SIGTERM")


def install_sigterm() -> bool:
    """Install the SIGTERM notice handler (main thread only); whether it is installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not _INSTALLED:
        _INSTALLED.append(signal.signal(signal.SIGTERM, _on_sigterm))
    return True


class PreemptibleTrainable:
    """Ray Tune trainable mixin: ``setup`` installs the SIGTERM handler in the main thread."""

    def setup(self, config: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        install_sigterm()
        return super().setup(config, *args, **kwargs)  # type: ignore[misc]



#: the shortest wait for the notice URL's answer, s: a metadata service answers in
#: milliseconds, but a poll that times out on a loaded node says nothing either way
URL_TIMEOUT_MIN_S = 1.0


def _poll_url(url: str, style: str, token_url: str | None, timeout: float) -> bool | None:
    """Whether the URL posts a notice (HTTP error: False); None when it could not be asked."""
    headers = {"Metadata-Flavor": "Google"} if style == "body" else {}
    try:
        if token_url:
            req = urllib.request.Request(token_url, method="PUT", headers={
                "X-aws-ec2-metadata-token-ttl-seconds": "300"})
            with urllib.request.urlopen(req, timeout=timeout) as r:
                headers["X-aws-ec2-metadata-token"] = r.read().decode().strip()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=timeout) as r:
            body = r.read().decode(errors="replace").strip()
            return r.status == 200 and (style == "status" or body.upper() == "TRUE")
    except urllib.error.HTTPError:
        return False            # 404 (no notice yet) or another refusal: no notice
    except (urllib.error.URLError, OSError, ValueError):
        return None             # refused, unreachable, timed out: unknown


def _ray_node() -> str | None:
    """This process's Ray node id (hex), or None outside a connected Ray worker."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - no Ray here: no drain source
        return None


def _draining(node: str) -> int | None:
    """Ray's drain deadline for ``node`` (ms since the epoch), or None when not draining."""
    from mutune._internals import draining_nodes

    nodes = draining_nodes()
    return None if nodes is None else nodes.get(node)


class NoticeWatcher:
    """A daemon thread polling a notice file and/or URL every ``poll_s`` s (edge-triggered)."""

    def __init__(self, settings: dict[str, Any] | None) -> None:
        s = dict(settings or {})
        self.file = Path(s["notice_file"]) if s.get("notice_file") else None
        self.url, self.style = s.get("notice_url"), s.get("notice_style") or "status"
        self.token_url, self.poll_s = s.get("token_url"), float(s.get("poll_s") or 1.0)
        self.node = _ray_node() if s.get("ray_drain") else None
        self.drain_poll_s, self._next_drain = float(s.get("drain_poll_s") or 1.0), 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = False

    def _posted(self) -> str | None | bool:
        """The notice's source, None when none, False when the URL's state is unknown."""
        if self.file is not None and self.file.exists():
            return f"notice file {self.file}"
        unknown = False
        if self.url:
            got = _poll_url(self.url, self.style, self.token_url,
                            max(min(self.poll_s, 2.0), URL_TIMEOUT_MIN_S))
            if got:
                return f"notice at {self.url}"
            unknown = got is None
        if self.node is not None and time.monotonic() >= self._next_drain:
            self._next_drain = time.monotonic() + self.drain_poll_s
            deadline = _draining(self.node)
            if deadline is not None:
                return (f"Ray drains node {self.node[:8]}" + (
                    f" (deadline in {max(deadline / 1000 - time.time(), 0):.0f} s)"
                    if deadline else ""))
        return False if unknown else None

    @property
    def wait_s(self) -> float:
        """Seconds between two polls: the shortest period among the sources it watches."""
        periods = [self.poll_s] if (self.file is not None or self.url) else []
        if self.node is not None:
            periods.append(self.drain_poll_s)
        return min(periods or [self.poll_s])

    def _run(self) -> None:
        while not self._stop.wait(self.wait_s):
            got = self._posted()
            if got is False:        # the URL could not be asked: the state stays as it was
                continue
            if got and not self._seen:
                notice(got)
            self._seen = got is not None

    def __enter__(self) -> "NoticeWatcher":
        if self.file is not None or self.url or self.node is not None:
            self._seen = bool(self._posted())       # a notice already up is not new
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="mutune-preemption-notice")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


class Preemption:
    """Whether a notice is pending for the loop, from its own SIGTERM or :func:`notice`."""

    def __init__(self) -> None:
        self._own = False
        self._old: Any = None

    @property
    def requested(self) -> bool:
        """True once a notice arrived."""
        return self._own or _NOTICE.is_set()

    @property
    def reason(self) -> str:
        """What posted the notice (``SIGTERM``, ``notice file …``, ``notice at …``)."""
        return _REASON[-1] if _REASON else "SIGTERM"

    def consume(self) -> None:
        """The loop ended on the notice: clear it for the next trial of this process."""
        self._own = False
        _NOTICE.clear()

    def __enter__(self) -> "Preemption":
        if threading.current_thread() is threading.main_thread() and not _INSTALLED:
            self._old = signal.signal(signal.SIGTERM, self._on_term)
        return self

    def _on_term(self, signum: int, frame: Any) -> None:
        self._own = True

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
