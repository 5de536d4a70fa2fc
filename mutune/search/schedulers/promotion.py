"""Asynchronous successive halving, **promotion** variant (Li et al. 2020, MLSys, §3, Algorithm 2).
"""
from __future__ import annotations

import math
from typing import Any

from mutune.errors import SearchError
from mutune.search.schedulers.contract import Decision, Judgement
from mutune.search.schedulers.halving import RungScheduler

__all__ = ["PromotionASHA"]


class PromotionASHA(RungScheduler):
    """ASHA core, promotion variant: a paused trial is promotable from the top ⌊n/η⌋ of its rung."""

    KIND = "asha-promotion"
    AT_LEAST_ONE = False
    variant = "promotion"

    def __init__(self, *, grace_period: int, reduction_factor: int, max_t: int,
                 mode: str = "min") -> None:
        super().__init__(grace_period=grace_period, reduction_factor=reduction_factor,
                         max_t=max_t, mode=mode)
        self._paused: dict[str, int] = {}       # trial → milestone, in pause order
        self._promoted: list[tuple[str, int]] = []

    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Record a report at training ``step``; SearchError if malformed, ended or paused."""
        trial, step, value = self._checked(trial, step, value)
        if trial in self._paused:
            raise SearchError(f"trial {trial!r} reported at step {step} while paused at rung "
                              f"{self._paused[trial]}; promote it first")
        out: list[Judgement] = []
        i = self._judged.get(trial, 0)
        while i < len(self.milestones) and self.milestones[i] <= step:
            j = self._record(trial, self.milestones[i], value)
            i += 1
            out.append(j)
            if j.decision is Decision.DIVERGED:
                break
        self._judged[trial] = i
        if not math.isfinite(value):
            if not out:
                out.append(Judgement(trial, step, value, None, Decision.DIVERGED))
            self._ended[trial] = Decision.DIVERGED
            return out
        if step >= self.max_t:
            self._ended[trial] = Decision.COMPLETE
            return [self._relabel(j, Decision.COMPLETE) for j in out]
        if not out:
            return out
        # pause at the lowest rung where it is outside the top ⌊n/η⌋, else at the highest
        at = next((k for k, j in enumerate(out) if j.decision is Decision.STOP), len(out) - 1)
        out = [self._relabel(j, Decision.CONTINUE) for j in out[:at]] + \
              [self._relabel(out[at], Decision.PAUSE)]
        self._paused[trial] = out[-1].milestone
        return out

    def _promotable(self, trial: str, milestone: int) -> tuple[bool, float | None]:
        return self._rank(milestone, self._rungs[milestone].by_trial[trial])

    def candidate(self) -> Judgement | None:
        """The paused trial to promote on a free slot, or None (then start a new trial)."""
        by_rung: dict[int, list[str]] = {}
        for t, m in self._paused.items():
            by_rung.setdefault(m, []).append(t)
        sign = 1.0 if self.mode == "min" else -1.0
        for m in sorted(by_rung, reverse=True):
            rung = self._rungs[m]
            best: tuple[float, int, str, float | None] | None = None
            for order, t in enumerate(by_rung[m]):
                inside, cutoff = self._promotable(t, m)
                v = rung.by_trial[t]
                if inside and (best is None or (sign * v, order) < best[:2]):
                    best = (sign * v, order, t, cutoff)
            if best is not None:
                return Judgement(best[2], m, rung.by_trial[best[2]], best[3],
                                 Decision.PROMOTE)
        return None

    def promote(self, trial: str) -> Judgement:
        """Resume paused ``trial`` towards its next rung; SearchError unless paused and promotable.
        """
        m = self._paused.get(trial)
        if m is None:
            raise SearchError(f"trial {trial!r} is not paused; only paused trials promote")
        inside, cutoff = self._promotable(trial, m)
        v = self._rungs[m].by_trial[trial]
        if not inside:
            raise SearchError(f"trial {trial!r} ({v}) is not in the top ⌊n/η⌋ of rung {m} "
                              f"(cutoff {cutoff})")
        del self._paused[trial]
        self._promoted.append((trial, m))
        return Judgement(trial, m, v, cutoff, Decision.PROMOTE)

    def finish(self) -> list[Judgement]:
        """End of sweep: stop every paused trial (STOP at its rung), in pause order."""
        out = []
        for t, m in list(self._paused.items()):
            _, cutoff = self._promotable(t, m)
            out.append(Judgement(t, m, self._rungs[m].by_trial[t], cutoff, Decision.STOP))
            self._ended[t] = Decision.STOP
            del self._paused[t]
        return out

    def paused(self) -> dict[str, int]:
        return dict(self._paused)

    def promotions(self) -> list[tuple[str, int]]:
        """(trial, milestone promoted from), in promotion order (a copy)."""
        return list(self._promoted)

    def _extra_state(self) -> dict[str, Any]:
        return {"paused": [[t, m] for t, m in self._paused.items()],
                "promoted": [[t, m] for t, m in self._promoted]}

    def _load_extra(self, state: dict[str, Any]) -> None:
        self._paused = {str(t): int(m) for t, m in state["paused"]}
        self._promoted = [(str(t), int(m)) for t, m in state["promoted"]]

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PromotionASHA":
        """Rebuild from :meth:`state_dict` output. Raises SearchError: another kind/version."""
        return super().from_state(state)  # type: ignore[return-value]
