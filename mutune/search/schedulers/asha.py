"""Asynchronous successive halving (ASHA), stopping variant.

Li et al. 2020, "A System for Massively Parallel Hyperparameter Tuning", MLSys, §3."""
from __future__ import annotations

import math
from typing import Any

from mutune.errors import SearchError
from mutune.search.schedulers.contract import Decision, Judgement
from mutune.search.schedulers.halving import RungScheduler
from mutune.search.schedulers.rungs import bracket_count, rung_milestones

__all__ = ["ASHA", "Decision", "Judgement", "rung_milestones", "bracket_count"]


class ASHA(RungScheduler):
    """ASHA core (stopping variant): feed it reports, get :class:`Judgement` objects.

    Raises:
        SearchError: a setting out of range (names it, its value and the rule)."""

    KIND = "asha"
    AT_LEAST_ONE = True
    variant = "stopping"

    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Judge a report of ``value`` at ``step``; SearchError if malformed or the trial ended."""
        trial, step, value = self._checked(trial, step, value)
        full = step >= self.max_t
        out: list[Judgement] = []
        i = self._judged.get(trial, 0)
        while i < len(self.milestones) and self.milestones[i] <= step:
            j = self._record(trial, self.milestones[i], value)
            i += 1
            if full and j.decision is not Decision.DIVERGED:
                j = self._relabel(j, Decision.COMPLETE)
            out.append(j)
            if j.decision in (Decision.STOP, Decision.DIVERGED):
                self._ended[trial] = j.decision
                break
        self._judged[trial] = i
        if not out and not math.isfinite(value):
            out.append(Judgement(trial, step, value, None, Decision.DIVERGED))
            self._ended[trial] = Decision.DIVERGED
        if full and trial not in self._ended:
            self._ended[trial] = Decision.COMPLETE
        return out

    def candidate(self) -> Judgement | None:
        return None

    def promote(self, trial: str) -> Judgement:
        """Raises SearchError: the stopping variant never pauses, so never promotes."""
        raise SearchError(f"trial {trial!r}: the stopping variant of ASHA never promotes")

    def paused(self) -> dict[str, int]:
        return {}

    def finish(self) -> list[Judgement]:
        return []

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ASHA":
        """Rebuild from :meth:`state_dict` output. Raises SearchError: another kind/version."""
        return super().from_state(state)  # type: ignore[return-value]
