"""What a trial wrote: its stdout and stderr tails and its traceback, handed to the driver.

A trial runs in a Ray worker; the recorder lives in the driver (DESIGN.md §2). Inside the worker,
:func:`capture` tees ``sys.stdout``/``sys.stderr`` into bounded buffers (the worker's own log
files still receive everything) and, when the block ends — normally or by an exception — writes
``{log_dir}/{trial key}.json`` = {"stdout", "stderr", "traceback"}. The driver's
:class:`~mutune.search.book.SweepBook` reads it with :func:`collect` when Ray reports the trial
finished and records it (``Recorder.trial_logged``). ``log_dir`` lies under the sweep's Ray
storage folder, which a local cluster shares with the driver; on a remote cluster without shared
storage the file is absent and the driver keeps Ray's own copy of the traceback.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback as tb
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["capture", "collect", "LOG_TAIL_CHARS"]

#: Characters of each stream kept (the tail: a failing trial's last lines matter most).
LOG_TAIL_CHARS = 65_536


class _Tee(io.TextIOBase):
    """Writes to ``stream`` and keeps the last ``limit`` characters written."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream, self.limit, self.parts, self.size = stream, limit, [], 0

    def write(self, text: str) -> int:
        if self.stream is not None:
            self.stream.write(text)
        self.parts.append(text)
        self.size += len(text)
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
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return Path(log_dir) / f"{safe}.json"


@contextlib.contextmanager
def capture(log_dir: str | Path | None, key: str,
            limit: int = LOG_TAIL_CHARS) -> Iterator[None]:
    """Tee stdout/stderr of the block and write them (with the traceback of an exception,
    which is re-raised) to ``log_dir/key.json``; ``log_dir`` None captures nothing."""
    if log_dir is None:
        yield
        return
    out, err = _Tee(sys.stdout, limit), _Tee(sys.stderr, limit)
    trace: str | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    except BaseException:
        trace = tb.format_exc()[-limit:]
        raise
    finally:
        path = _path(log_dir, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stdout": out.value(), "stderr": err.value(),
                                   "traceback": trace}), encoding="utf-8")
        tmp.replace(path)


def collect(log_dir: str | Path | None, key: str) -> dict[str, Any] | None:
    """The record :func:`capture` wrote for ``key`` (and delete the file), or None."""
    if log_dir is None:
        return None
    path = _path(log_dir, key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    path.unlink(missing_ok=True)
    return data
