"""A SIGTERM flag for a training loop (spot preemption: finish the step, checkpoint, exit).

The handler is installed only when the loop runs in the main thread (a standalone run, the
tests): Python cannot install signal handlers in other threads, and Ray Tune runs function
trainables in a thread of its actor (:mod:`mutune.search.trial.trainable` says what then
bounds the lost work).
"""
from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["Preemption"]


class Preemption:
    """A flag set by SIGTERM while the loop runs (main thread only); restores the handler."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def __enter__(self) -> "Preemption":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._on_term)
        return self

    def _on_term(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
