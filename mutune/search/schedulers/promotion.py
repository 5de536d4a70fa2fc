"""Asynchronous successive halving, **promotion** variant, as one pure object.

Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur, Hardt, Recht, Talwalkar 2020, "A System for Massively
Parallel Hyperparameter Tuning" (MLSys), §3, Algorithm 2 (``get_job``), with the choices
DESIGN.md §4 fixes:

* a trial runs until it reaches its next rung milestone r·η^k, then **pauses** there and frees
  its resources (decision ``PAUSE``); a report at step t records its value at every milestone
  ≤ t not yet recorded, lowest first, and the trial pauses at the highest of them (it already
  holds the evidence for the lower ones, which count as passed: ``CONTINUE``);
* whenever a slot frees, :meth:`PromotionASHA.candidate` scans rungs top-down and offers the
  best paused trial that is *promotable*: among the best max(⌊n/η⌋, 1) of the n values recorded
  at its rung, itself included, ties favouring it (the same rule as the stopping variant's
  cutoff; values of trials already promoted or stopped stay recorded). Ties between promotable
  trials go to the earlier pause. The driver then calls :meth:`PromotionASHA.promote` (decision
  ``PROMOTE``) and resumes the trial from its checkpoint; if there is no candidate it starts a
  new trial, and with no new trial left it leaves the slot idle;
* a trial reaching max_t completes (when max_t is not a milestone, a trial promoted from the top
  milestone runs on to max_t);
* NaN/inf: counted in n, ranks last, never a cutoff, and the trial ends at once as ``DIVERGED``;
* at the end of the sweep (nothing running, no candidate, no new trial)
  :meth:`PromotionASHA.finish` stops every trial still paused (``STOP``), so none is left paused.

Peers: Syne Tune's ``type="promotion"`` agrees on the rule but judges only exact milestone
hits; Ray Tune has no promotion ASHA (its synchronous ``HyperBandScheduler`` pauses whole
brackets); Optuna's pruners are stopping-only.
"""
from __future__ import annotations

import bisect
import math
from typing import Any

from mutune.errors import SearchError
from mutune.search.schedulers.asha import Decision, Judgement, _Rung, rank_at_rung, rung_milestones

__all__ = ["PromotionASHA"]


def _enc(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)


class PromotionASHA:
    """ASHA core, promotion variant: feed it reports, ask it whom to promote on a free slot.

    Args:
        grace_period: r, the first milestone, in training steps (≥ 1).
        reduction_factor: η (≥ 2): at most the best 1/η of a rung are promoted.
        max_t: the largest budget in steps; a trial reaching it ends as completed.
        mode: ``"min"`` (losses) or ``"max"`` (accuracies).
    Raises:
        SearchError: a setting out of range (names it, its value and the rule).
    """

    STATE_VERSION = 1
    variant = "promotion"

    def __init__(self, *, grace_period: int, reduction_factor: int, max_t: int,
                 mode: str = "min") -> None:
        if mode not in ("min", "max"):
            raise SearchError(f"mode = {mode!r}: must be 'min' or 'max'")
        self.milestones = rung_milestones(grace_period, reduction_factor, max_t)
        self.grace_period, self.reduction_factor, self.max_t = (grace_period, reduction_factor,
                                                                 max_t)
        self.mode = mode
        self._rungs = {m: _Rung() for m in self.milestones}
        self._judged: dict[str, int] = {}       # trial -> number of milestones recorded
        self._paused: dict[str, int] = {}       # trial -> milestone, in pause order
        self._promoted: list[tuple[str, int]] = []
        self._ended: dict[str, Decision] = {}
        self._completed: set[str] = set()

    # -- reports ---------------------------------------------------------------------------
    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Record ``trial``'s report of ``value`` at training ``step``.

        Returns one judgement per milestone ≤ step not yet recorded, lowest first: CONTINUE
        for those passed, PAUSE at the highest (unless it is max_t: then CONTINUE and the
        trial is completed), or a single DIVERGED for a non-finite value (at the first such
        milestone, or at ``step`` between milestones). The driver must pause the trial when
        the last judgement is PAUSE and stop it on DIVERGED.

        Raises:
            SearchError: the trial ended, is paused, or ``step`` < 1.
        """
        if trial in self._ended or trial in self._completed:
            raise SearchError(f"trial {trial!r} reported at step {step} after it ended")
        if trial in self._paused:
            raise SearchError(f"trial {trial!r} reported at step {step} while paused at rung "
                              f"{self._paused[trial]}; promote it first")
        if step < 1:
            raise SearchError(f"step = {step}: must be >= 1")
        value = float(value)
        out: list[Judgement] = []
        i = self._judged.get(trial, 0)
        finite = math.isfinite(value)
        while i < len(self.milestones) and self.milestones[i] <= step:
            m = self.milestones[i]
            rung = self._rungs[m]
            rung.by_trial[trial] = value
            i += 1
            if not finite:
                rung.n_nonfinite += 1
                out.append(Judgement(trial, m, value, None, Decision.DIVERGED))
                break
            bisect.insort(rung.finite, value)
            _, cutoff = rank_at_rung(rung, value, self.reduction_factor, self.mode)
            out.append(Judgement(trial, m, value, cutoff, Decision.CONTINUE))
        self._judged[trial] = i
        if not finite:
            if not out:
                out.append(Judgement(trial, step, value, None, Decision.DIVERGED))
            self._ended[trial] = Decision.DIVERGED
            return out
        if step >= self.max_t:
            self._completed.add(trial)
        elif out:
            last = out[-1]
            out[-1] = Judgement(trial, last.milestone, last.value, last.cutoff, Decision.PAUSE)
            self._paused[trial] = last.milestone
        return out

    # -- promotion -------------------------------------------------------------------------
    def candidate(self) -> Judgement | None:
        """The paused trial to promote on a free slot, or None (then start a new trial).

        Scans rungs top-down; at each, the best promotable paused trial (earliest pause on
        ties). Pure: nothing changes until :meth:`promote`. O(paused · log n).
        """
        by_rung: dict[int, list[str]] = {}
        for t, m in self._paused.items():
            by_rung.setdefault(m, []).append(t)
        sign = 1.0 if self.mode == "min" else -1.0
        for m in sorted(by_rung, reverse=True):
            rung = self._rungs[m]
            best: tuple[float, int, str, float | None] | None = None
            for order, t in enumerate(by_rung[m]):
                v = rung.by_trial[t]
                inside, cutoff = rank_at_rung(rung, v, self.reduction_factor, self.mode)
                if inside and (best is None or (sign * v, order) < best[:2]):
                    best = (sign * v, order, t, cutoff)
            if best is not None:
                t, cutoff = best[2], best[3]
                return Judgement(t, m, rung.by_trial[t], cutoff, Decision.PROMOTE)
        return None

    def promote(self, trial: str) -> Judgement:
        """Resume paused ``trial`` towards its next rung (the driver restores its checkpoint).

        Raises:
            SearchError: ``trial`` is not paused, or not promotable at its rung.
        """
        m = self._paused.get(trial)
        if m is None:
            raise SearchError(f"trial {trial!r} is not paused; only paused trials promote")
        rung = self._rungs[m]
        v = rung.by_trial[trial]
        inside, cutoff = rank_at_rung(rung, v, self.reduction_factor, self.mode)
        if not inside:
            raise SearchError(f"trial {trial!r} ({v}) is not in the top "
                              f"max(⌊n/η⌋, 1) of rung {m} (cutoff {cutoff})")
        del self._paused[trial]
        self._promoted.append((trial, m))
        return Judgement(trial, m, v, cutoff, Decision.PROMOTE)

    def finish(self) -> list[Judgement]:
        """End of sweep: stop every paused trial (STOP at its rung), in pause order.

        Call it when nothing is running, :meth:`candidate` is None and no new trial will
        start; afterwards no trial is paused.
        """
        out = []
        for t, m in list(self._paused.items()):
            rung = self._rungs[m]
            _, cutoff = rank_at_rung(rung, rung.by_trial[t], self.reduction_factor, self.mode)
            out.append(Judgement(t, m, rung.by_trial[t], cutoff, Decision.STOP))
            self._ended[t] = Decision.STOP
            del self._paused[t]
        return out

    # -- queries ---------------------------------------------------------------------------
    def stopped(self, trial: str) -> Decision | None:
        """The decision that ended ``trial`` (STOP or DIVERGED), or None."""
        return self._ended.get(trial)

    def paused(self) -> dict[str, int]:
        """Paused trials → the milestone (steps) each waits at, in pause order (a copy)."""
        return dict(self._paused)

    def promotions(self) -> list[tuple[str, int]]:
        """(trial, milestone promoted from), in promotion order (a copy)."""
        return list(self._promoted)

    def completed(self, trial: str) -> bool:
        """Whether ``trial`` reached max_t."""
        return trial in self._completed

    def rung_values(self) -> dict[int, dict[str, float]]:
        """Milestone → {trial: value recorded there} (a copy)."""
        return {m: dict(r.by_trial) for m, r in self._rungs.items()}

    # -- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A versioned, JSON-able snapshot (non-finite values as strings; ordered lists where
        order matters: paused and promotions)."""
        return {"version": self.STATE_VERSION, "kind": "asha-promotion",
                "grace_period": self.grace_period, "reduction_factor": self.reduction_factor,
                "max_t": self.max_t, "mode": self.mode,
                "rungs": {str(m): [[t, _enc(v)] for t, v in r.by_trial.items()]
                          for m, r in self._rungs.items()},
                "judged": [[t, i] for t, i in self._judged.items()],
                "paused": [[t, m] for t, m in self._paused.items()],
                "promoted": [[t, m] for t, m in self._promoted],
                "ended": [[t, d.value] for t, d in self._ended.items()],
                "completed": sorted(self._completed)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PromotionASHA":
        """Rebuild from :meth:`state_dict` output.

        Raises:
            SearchError: unknown version or kind.
        """
        if state.get("version") != cls.STATE_VERSION or state.get("kind") != "asha-promotion":
            raise SearchError(f"cannot load scheduler state version {state.get('version')!r} "
                              f"kind {state.get('kind')!r} as asha-promotion")
        obj = cls(grace_period=state["grace_period"],
                  reduction_factor=state["reduction_factor"], max_t=state["max_t"],
                  mode=state["mode"])
        for m, pairs in state["rungs"].items():
            rung = obj._rungs[int(m)]
            for t, v in pairs:
                v = float(v)
                rung.by_trial[t] = v
                if math.isfinite(v):
                    bisect.insort(rung.finite, v)
                else:
                    rung.n_nonfinite += 1
        obj._judged = {t: int(i) for t, i in state["judged"]}
        obj._paused = {t: int(m) for t, m in state["paused"]}
        obj._promoted = [(t, int(m)) for t, m in state["promoted"]]
        obj._ended = {t: Decision(d) for t, d in state["ended"]}
        obj._completed = set(state["completed"])
        return obj
