"""The searcher contract: searchers propose hyperparameters; schedulers decide (Syne Tune)."""
from __future__ import annotations

import abc
from typing import Any

from mutune.errors import SearchError

__all__ = ["Searcher"]


class Searcher(abc.ABC):
    """The searcher contract: ≤ ``num_samples`` proposals, each key once, every call logged."""

    def __init__(self, num_samples: int) -> None:
        if not isinstance(num_samples, int) or num_samples < 1:
            raise SearchError(f"num_samples = {num_samples!r}: must be an integer >= 1")
        self.num_samples = num_samples
        self.proposed: dict[str, dict[str, float]] = {}
        self._events: list[tuple] = []

    @property
    def exhausted(self) -> bool:
        """True once ``num_samples`` points were proposed."""
        return len(self.proposed) >= self.num_samples

    def suggest(self, key: str) -> dict[str, float] | None:
        """The next point (name → value, fixed hyperparameters included), or None when
        exhausted. Asking again for a known ``key`` returns its point (idempotent)."""
        if key in self.proposed:
            return dict(self.proposed[key])
        if self.exhausted:
            return None
        point = self._next(len(self.proposed), key)
        self.proposed[key] = point
        self._events.append(("suggest", key, dict(point)))
        return dict(point)

    @abc.abstractmethod
    def _next(self, index: int, key: str) -> dict[str, float]:
        """The point of proposal number ``index`` (0-based) for trial ``key``."""

    def observe(self, key: str, step: int, value: float) -> None:
        """A report of the ranked metric at training ``step``."""
        if key in self.proposed and self._observe(key, int(step), float(value)):
            self._events.append(("observe", key, int(step), float(value)))

    def complete(self, key: str, status: str) -> None:
        """The trial ended with ``status`` (completed/stopped/diverged/failed)."""
        if key in self.proposed and self._complete(key, status):
            self._events.append(("complete", key, status))

    def _observe(self, key: str, step: int, value: float) -> bool:
        return False   # model-free: nothing to remember

    def _complete(self, key: str, status: str) -> bool:
        return False

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: every call in order (``["suggest", key, point]``, ``["observe", key,
        step, value]``, ``["complete", key, status]``), enough to resume: a fresh searcher of
        the same settings fed the same calls is in the same state (TPE's seeded sampler
        proposes the same points for the same history)."""
        return {"version": 1, "kind": type(self).__name__, "events": [list(e) for e in
                                                                       self._events]}

    def load_state(self, state: dict[str, Any]) -> None:
        """Replay :meth:`state_dict` output into a freshly built searcher of the same settings.

        Raises:
            SearchError: another searcher's state, or a saved point that differs from what
                this searcher proposes (the settings or the seed changed)."""
        if state.get("version") != 1 or state.get("kind") != type(self).__name__:
            raise SearchError(f"cannot load searcher state version {state.get('version')!r} "
                              f"kind {state.get('kind')!r} into {type(self).__name__}")
        for ev in state["events"]:
            if ev[0] == "suggest":
                got = self.suggest(ev[1])
                if got != ev[2]:
                    raise SearchError(f"saved point of trial {ev[1]!r} {ev[2]} differs from "
                                      f"the searcher's {got}: settings or seed changed")
            elif ev[0] == "observe":
                self.observe(ev[1], int(ev[2]), float(ev[3]))
            elif ev[0] == "complete":
                self.complete(ev[1], ev[2])
