"""What a trial wrote: its stdout and stderr tails and its traceback, handed to the driver."""
from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback as tb
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["capture", "collect", "Captured", "LOG_TAIL_CHARS"]

#: Characters of each stream kept (the tail: a failing trial's last lines matter most).
LOG_TAIL_CHARS = 65_536


class _Tee(io.TextIOBase):
    """Writes to ``stream`` and keeps the last ``limit`` characters written."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream, self.limit, self.parts, self.size = stream, limit, [], 0
        self.written = 0        # characters ever written (what a save has seen)

    def write(self, text: str) -> int:
        if self.stream is not None:
            self.stream.write(text)
        self.parts.append(text)
        self.size += len(text)
        self.written += len(text)
        if self.size > 2 * self.limit:
            joined = "".join(self.parts)[-self.limit:]
            self.parts, self.size = [joined], len(joined)
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:
            self.stream.flush()

    def value(self) -> str:
        return "".join(self.parts)[-self.limit:]


def _path(log_dir: str | Path, key: str) -> Path:
    from mutune.search.trial.remote import safe_name

    return Path(log_dir) / f"{safe_name(key)}.json"


class Captured:
    """The handle :func:`capture` yields: ``save()`` writes what was captured so far."""

    def __init__(self, log_dir: str | Path | None, key: str, limit: int) -> None:
        self.path = None if log_dir is None else _path(log_dir, key)
        self.out, self.err = _Tee(sys.stdout, limit), _Tee(sys.stderr, limit)
        self._saved: tuple[int, int, str | None] | None = None    # what the file holds

    def save(self, trace: str | None = None) -> None:
        """Write stdout, stderr and ``trace`` atomically, unless nothing new came since."""
        if self.path is None:
            return
        state = (self.out.written, self.err.written, trace)
        if state == self._saved:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stdout": self.out.value(), "stderr": self.err.value(),
                                   "traceback": trace}), encoding="utf-8")
        tmp.replace(self.path)
        self._saved = state


@contextlib.contextmanager
def capture(log_dir: str | Path | None, key: str, limit: int = LOG_TAIL_CHARS,
            upload: Callable[[Path], None] | None = None) -> Iterator[Captured]:
    """Tee the block's stdout/stderr (and an exception's traceback) to ``log_dir/key.json``."""
    cap = Captured(log_dir, key, limit)
    trace: str | None = None
    try:
        with contextlib.redirect_stdout(cap.out), contextlib.redirect_stderr(cap.err):
            yield cap
    except SystemExit as exc:
        # Ray ends a stopped trial's thread with SystemExit(0) at its next report, after the
        # driver has collected (and deleted) the file: not the trial's error, and nothing to
        # write again — a save here would leave a file behind the finished run
        if exc.code not in (0, None):
            trace = tb.format_exc()[-limit:]
        raise
    except BaseException:
        trace = tb.format_exc()[-limit:]
        raise
    finally:
        cap.save(trace)
        if upload is not None and cap.path is not None:
            try:
                upload(cap.path)
            except Exception as exc:  # noqa: BLE001 - the local record stands
                print(f"mutune: the trial log was not uploaded: {exc}", file=sys.stderr)


def collect(log_dir: str | Path | None, key: str,
            remote: Any = None) -> dict[str, Any] | None:
    """The record :func:`capture` wrote for ``key`` (deleted), else ``remote``'s copy, or None."""
    if log_dir is None:
        return None
    path = _path(log_dir, key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = remote.get_log(key) if remote is not None else None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None
    path.unlink(missing_ok=True)
    return data
