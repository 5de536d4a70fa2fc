"""What the two successive-halving cores share: settings, rungs, per-trial progress, state."""
from __future__ import annotations

from typing import Any, ClassVar

from mutune.errors import SearchError
from mutune.search.schedulers.contract import Decision, Judgement, Scheduler
from mutune.search.schedulers.inputs import check_step, check_trial, check_value
from mutune.search.schedulers.rungs import (Rung, check_mode, decode_rungs, encode_rungs,
                                            rank_at_rung, rung_milestones)

__all__ = ["RungScheduler"]


class RungScheduler(Scheduler):
    """Base of the successive-halving cores (one bracket of rungs).

    Raises:
        SearchError: a setting out of range (names it, its value and the rule)."""

    KIND: ClassVar[str]
    #: whether the top of a rung holds at least one trial (k = max(⌊n/η⌋, 1)) or ⌊n/η⌋
    AT_LEAST_ONE: ClassVar[bool]
    STATE_VERSION: ClassVar[int] = 2

    def __init__(self, *, grace_period: int, reduction_factor: int, max_t: int,
                 mode: str = "min") -> None:
        self.mode = check_mode(mode)
        self.milestones = rung_milestones(grace_period, reduction_factor, max_t)
        self.grace_period, self.reduction_factor, self.max_t = (grace_period, reduction_factor,
                                                                 max_t)
        self._rungs: dict[int, Rung] = {m: Rung() for m in self.milestones}
        self._judged: dict[str, int] = {}       # trial → milestones recorded
        self._ended: dict[str, Decision] = {}   # trial → STOP / DIVERGED / COMPLETE

    def _checked(self, trial: Any, step: Any, value: Any) -> tuple[str, int, float]:
        """Validate a report and refuse one for an ended trial."""
        trial = check_trial(trial)
        step = check_step(trial, step)
        value = check_value(trial, value)
        if trial in self._ended:
            raise SearchError(f"trial {trial!r} reported at step {step} after it ended "
                              f"({self._ended[trial].value})")
        return trial, step, value

    def _rank(self, milestone: int, value: float) -> tuple[bool, float | None]:
        return rank_at_rung(self._rungs[milestone], value, self.reduction_factor, self.mode,
                            at_least_one=self.AT_LEAST_ONE)

    def _record(self, trial: str, milestone: int, value: float) -> Judgement:
        """Record ``value`` at ``milestone``: CONTINUE/STOP by top fraction, DIVERGED if
        non-finite."""
        if not self._rungs[milestone].add(trial, value):
            return Judgement(trial, milestone, value, None, Decision.DIVERGED)
        inside, cutoff = self._rank(milestone, value)
        return Judgement(trial, milestone, value, cutoff,
                         Decision.CONTINUE if inside else Decision.STOP)

    @staticmethod
    def _relabel(j: Judgement, decision: Decision) -> Judgement:
        return Judgement(j.trial, j.milestone, j.value, j.cutoff, decision)

    def ended(self, trial: str) -> Decision | None:
        return self._ended.get(trial)

    def milestones_of(self, trial: str) -> list[int]:
        return list(self.milestones)

    def rung_values(self) -> dict[int, dict[str, float]]:
        return {m: dict(r.by_trial) for m, r in self._rungs.items()}

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, state: dict[str, Any]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        """Versioned JSON: settings, rungs (NaN/inf as strings), progress and endings."""
        return {"version": self.STATE_VERSION, "kind": self.KIND,
                "grace_period": self.grace_period, "reduction_factor": self.reduction_factor,
                "max_t": self.max_t, "mode": self.mode,
                "rungs": encode_rungs(self._rungs),
                "judged": [[t, i] for t, i in self._judged.items()],
                "ended": [[t, d.value] for t, d in self._ended.items()],
                **self._extra_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "RungScheduler":
        """Rebuild from :meth:`state_dict` (version 1 or 2); SearchError for another kind/version.
        """
        if state.get("version") not in (1, cls.STATE_VERSION) or state.get("kind") != cls.KIND:
            raise SearchError(f"cannot load scheduler state version {state.get('version')!r} "
                              f"kind {state.get('kind')!r} as {cls.KIND}")
        obj = cls(grace_period=state["grace_period"],
                  reduction_factor=state["reduction_factor"], max_t=state["max_t"],
                  mode=state["mode"])
        obj._rungs = decode_rungs(state["rungs"], obj.milestones)

        def pairs(x: Any) -> Any:
            return x.items() if isinstance(x, dict) else x
        obj._judged = {str(t): int(i) for t, i in pairs(state["judged"])}
        obj._ended = {str(t): Decision(d) for t, d in pairs(state["ended"])}
        for t in state.get("completed", []):          # version 1 of the promotion variant
            obj._ended[str(t)] = Decision.COMPLETE
        obj._load_extra(state)
        return obj
