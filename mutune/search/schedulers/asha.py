"""Asynchronous successive halving (ASHA), stopping variant, as one pure, seeded-free object.

Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur, Hardt, Recht, Talwalkar 2020, "A System for Massively
Parallel Hyperparameter Tuning" (MLSys), Algorithm 2, with the choices DESIGN.md §4 fixes:

* fidelity is training steps; rung milestones are r·η^k ≤ max_t (r = grace period, η = reduction
  factor), computed in exact integers;
* a report at step t judges every milestone ≤ t the trial has not been judged at, lowest first,
  with that report's value (reports may skip milestones);
* a trial continues iff it is among the best max(⌊n/η⌋, 1) of the n values recorded at the rung,
  itself included, ties favouring the trial (Ray Tune instead cuts at a percentile of the *other*
  trials; Optuna and Determined agree with this rule);
* a NaN/inf value counts in n and ranks last, is never a cutoff, and stops the trial at once as
  ``diverged``.

The object knows nothing of Ray: :mod:`mutune.search.backends.ray_tune.scheduler_adapter` drives it from Ray Tune, and a
replay can drive it from recorded reports. Rung values are kept in sorted lists (bisect), so a
decision costs O(log n) comparisons plus the list insert.
"""
from __future__ import annotations

import bisect
import enum
import math
from dataclasses import dataclass
from typing import Any

from mutune.errors import SearchError

__all__ = ["Decision", "Judgement", "ASHA", "rung_milestones", "bracket_count"]


class Decision(str, enum.Enum):
    """What the scheduler decided for a trial at a rung.

    ``CONTINUE``/``STOP``/``DIVERGED`` are the stopping variant's; promotion ASHA
    (:mod:`mutune.search.schedulers.promotion`) adds ``PAUSE`` (the trial waits at the rung, its resources
    freed) and ``PROMOTE`` (a paused trial resumes towards the next rung). Ray Tune's
    ``TrialScheduler`` has CONTINUE/PAUSE/STOP too; it has no promote (a paused trial is
    simply chosen to run again).
    """
    CONTINUE = "continue"
    STOP = "stop"
    DIVERGED = "diverged"
    PAUSE = "pause"
    PROMOTE = "promote"


@dataclass(frozen=True)
class Judgement:
    """One decision: ``trial`` judged at rung ``milestone`` (steps) with ``value`` against
    ``cutoff`` (the worst value still inside the top max(⌊n/η⌋, 1); None when the value was
    non-finite or no finite cutoff exists)."""
    trial: str
    milestone: int
    value: float
    cutoff: float | None
    decision: Decision


def _check_budget(grace_period: int, reduction_factor: int, max_t: int) -> None:
    for name, v, low in (("grace_period", grace_period, 1), ("reduction_factor",
                                                            reduction_factor, 2),
                         ("max_t", max_t, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise SearchError(f"{name} = {v!r}: must be an integer >= {low}")
    if max_t < grace_period:
        raise SearchError(f"max_t = {max_t}: must be >= grace_period ({grace_period})")


def rung_milestones(grace_period: int, reduction_factor: int, max_t: int) -> list[int]:
    """Rung milestones r·η^k for k = 0, 1, … while ≤ max_t, in steps, increasing.

    Raises:
        SearchError: r < 1, η < 2, max_t < r, or a non-integer setting.
    """
    _check_budget(grace_period, reduction_factor, max_t)
    out, m = [], grace_period
    while m <= max_t:
        out.append(m)
        m *= reduction_factor
    return out


def bracket_count(grace_period: int, reduction_factor: int, max_t: int) -> int:
    """Hyperband's number of brackets s_max + 1, with s_max = ⌊log_η(max_t / r)⌋.

    Computed in exact integers (largest s with r·η^s ≤ max_t), never with a float log:
    ``math.log(243, 3)`` is 4.999…, which would drop a bracket. Li et al. 2018 (JMLR), §3.
    """
    return len(rung_milestones(grace_period, reduction_factor, max_t))


class _Rung:
    """Values recorded at one milestone: finite ones sorted ascending, non-finite counted."""

    __slots__ = ("finite", "n_nonfinite", "by_trial")

    def __init__(self) -> None:
        self.finite: list[float] = []
        self.n_nonfinite = 0
        self.by_trial: dict[str, float] = {}

    @property
    def n(self) -> int:
        return len(self.finite) + self.n_nonfinite


def rank_at_rung(rung: "_Rung", value: float, reduction_factor: int,
                 mode: str) -> tuple[bool, float | None]:
    """Whether finite ``value`` (already recorded in ``rung``) is among the best
    max(⌊n/η⌋, 1) of the rung's n values, ties favouring it, and the cutoff (the worst value
    still inside; None when fewer finite values than that exist). O(log n)."""
    sorted_vals = rung.finite
    k = max(rung.n // reduction_factor, 1)
    if mode == "min":
        better = bisect.bisect_left(sorted_vals, value)
        cutoff = sorted_vals[k - 1] if k <= len(sorted_vals) else None
    else:
        better = len(sorted_vals) - bisect.bisect_right(sorted_vals, value)
        cutoff = sorted_vals[-k] if k <= len(sorted_vals) else None
    return better < k, cutoff


class ASHA:
    """ASHA scheduler core (stopping variant): feed it reports, get :class:`Judgement`s.

    Args:
        grace_period: r, the first milestone, in training steps (≥ 1).
        reduction_factor: η (≥ 2): at most the best 1/η of a rung go on.
        max_t: the largest budget in steps; a trial reaching it ends as completed.
        mode: ``"min"`` (losses) or ``"max"`` (accuracies).
    Raises:
        SearchError: a setting out of range (names it, its value and the rule).
    """

    STATE_VERSION = 1

    def __init__(self, *, grace_period: int, reduction_factor: int, max_t: int,
                 mode: str = "min") -> None:
        if mode not in ("min", "max"):
            raise SearchError(f"mode = {mode!r}: must be 'min' or 'max'")
        self.milestones = rung_milestones(grace_period, reduction_factor, max_t)
        self.grace_period, self.reduction_factor, self.max_t = (grace_period, reduction_factor,
                                                                 max_t)
        self.mode = mode
        self._rungs = {m: _Rung() for m in self.milestones}
        self._judged: dict[str, int] = {}  # trial -> number of milestones judged
        self._ended: dict[str, Decision] = {}

    # -- decisions -------------------------------------------------------------------------
    def _judge(self, trial: str, milestone: int, value: float) -> Judgement:
        rung = self._rungs[milestone]
        rung.by_trial[trial] = value
        if not math.isfinite(value):
            rung.n_nonfinite += 1
            return Judgement(trial, milestone, value, None, Decision.DIVERGED)
        bisect.insort(rung.finite, value)
        inside, cutoff = rank_at_rung(rung, value, self.reduction_factor, self.mode)
        decision = Decision.CONTINUE if inside else Decision.STOP
        return Judgement(trial, milestone, value, cutoff, decision)

    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Judge ``trial``'s report of ``value`` at training ``step``.

        Returns the judgements at every milestone ≤ step not yet judged, lowest first; the
        trial must stop if any is not CONTINUE (then later milestones are not judged). A
        non-finite value between milestones yields one DIVERGED judgement at ``step``.

        Raises:
            SearchError: the trial already ended, or ``step`` < 1.
        """
        if trial in self._ended:
            raise SearchError(f"trial {trial!r} reported at step {step} after it ended "
                              f"({self._ended[trial].value})")
        if step < 1:
            raise SearchError(f"step = {step}: must be >= 1")
        value = float(value)
        out: list[Judgement] = []
        i = self._judged.get(trial, 0)
        while i < len(self.milestones) and self.milestones[i] <= step:
            j = self._judge(trial, self.milestones[i], value)
            out.append(j)
            i += 1
            if j.decision is not Decision.CONTINUE:
                self._ended[trial] = j.decision
                break
        self._judged[trial] = i
        if not out and not math.isfinite(value):
            j = Judgement(trial, step, value, None, Decision.DIVERGED)
            self._ended[trial] = Decision.DIVERGED
            out.append(j)
        return out

    def stopped(self, trial: str) -> Decision | None:
        """The decision that ended ``trial`` (STOP or DIVERGED), or None if it was not ended."""
        return self._ended.get(trial)

    # -- the promotion hooks every core has (no-ops here: stopping never pauses) ------------
    variant = "stopping"

    def candidate(self) -> Judgement | None:
        """The paused trial to promote on a free slot: always None (nothing ever pauses)."""
        return None

    def promote(self, trial: str) -> Judgement:
        """Raises SearchError: the stopping variant never pauses, so never promotes."""
        raise SearchError(f"trial {trial!r}: the stopping variant of ASHA never promotes")

    def paused(self) -> dict[str, int]:
        """Paused trials → the milestone they wait at: always empty in the stopping variant."""
        return {}

    def finish(self) -> list[Judgement]:
        """End of sweep: nothing is paused, so nothing to stop."""
        return []

    def rung_values(self) -> dict[int, dict[str, float]]:
        """Milestone → {trial: value judged there} (a copy)."""
        return {m: dict(r.by_trial) for m, r in self._rungs.items()}

    # -- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A versioned, JSON-able snapshot (non-finite values as strings)."""
        def enc(v: float) -> float | str:
            return v if math.isfinite(v) else str(v)
        return {"version": self.STATE_VERSION, "kind": "asha",
                "grace_period": self.grace_period, "reduction_factor": self.reduction_factor,
                "max_t": self.max_t, "mode": self.mode,
                "rungs": {str(m): {t: enc(v) for t, v in r.by_trial.items()}
                          for m, r in self._rungs.items()},
                "judged": dict(self._judged),
                "ended": {t: d.value for t, d in self._ended.items()}}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ASHA":
        """Rebuild a scheduler from :meth:`state_dict` output.

        Raises:
            SearchError: unknown version or kind.
        """
        if state.get("version") != cls.STATE_VERSION or state.get("kind") != "asha":
            raise SearchError(f"cannot load scheduler state version {state.get('version')!r} "
                              f"kind {state.get('kind')!r}")
        obj = cls(grace_period=state["grace_period"],
                  reduction_factor=state["reduction_factor"], max_t=state["max_t"],
                  mode=state["mode"])
        for m, trials in state["rungs"].items():
            rung = obj._rungs[int(m)]
            for t, v in trials.items():
                v = float(v)
                rung.by_trial[t] = v
                if math.isfinite(v):
                    bisect.insort(rung.finite, v)
                else:
                    rung.n_nonfinite += 1
        obj._judged = {t: int(i) for t, i in state["judged"].items()}
        obj._ended = {t: Decision(d) for t, d in state["ended"].items()}
        return obj
