"""Asynchronous successive halving (ASHA), stopping variant.

Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur, Hardt, Recht, Talwalkar 2020, "A System for
Massively Parallel Hyperparameter Tuning" (MLSys), §3, with the rules of
docs/architecture.md §4:

* fidelity is training steps; rung milestones are r·η^k ≤ max_t (:mod:`.rungs`);
* a report at step t judges every milestone ≤ t the trial has not been judged at, lowest
  first, with that report's value (reports may skip milestones);
* a trial continues iff it is among the best max(⌊n/η⌋, 1) of the n values recorded at the
  rung, itself included, ties favouring the trial (Ray Tune instead cuts at a percentile of
  the *other* trials; Optuna and Determined agree with this rule);
* a trial that reaches max_t is **completed**, never stopped: the judgements of a report at
  step ≥ max_t record its value at the remaining rungs and are ``COMPLETE`` (it trained the
  full budget, so nothing is left to cut, and its checkpoints are kept);
* a NaN/inf value counts in n and ranks last, is never a cutoff, and ends the trial at once
  as ``DIVERGED``.

Rung values are kept sorted (bisect), so a decision costs O(log n) plus the insert.
"""
from __future__ import annotations

import math
from typing import Any

from mutune.errors import SearchError
from mutune.search.schedulers.contract import Decision, Judgement
from mutune.search.schedulers.halving import RungScheduler
from mutune.search.schedulers.rungs import bracket_count, rung_milestones

__all__ = ["ASHA", "Decision", "Judgement", "rung_milestones", "bracket_count"]


class ASHA(RungScheduler):
    """ASHA core (stopping variant): feed it reports, get :class:`Judgement`\\ s.

    Args:
        grace_period: r, the first milestone, in training steps (≥ 1).
        reduction_factor: η (≥ 2): at most the best 1/η of a rung go on.
        max_t: the largest budget in steps; a trial reaching it ends as completed.
        mode: ``"min"`` (losses) or ``"max"`` (accuracies).
    Raises:
        SearchError: a setting out of range (names it, its value and the rule).
    """

    KIND = "asha"
    AT_LEAST_ONE = True
    variant = "stopping"

    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Judge ``trial``'s report of ``value`` at training ``step``.

        Returns the judgements at every milestone ≤ step not yet judged, lowest first; the
        trial ends when the last is not CONTINUE (later milestones are then not judged). A
        non-finite value between milestones yields one DIVERGED judgement at ``step``.

        Raises:
            SearchError: a malformed step or value, or the trial already ended.
        """
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

    # -- the promotion hooks every core has (no-ops: the stopping variant never pauses) -----
    def candidate(self) -> Judgement | None:
        """Always None: nothing ever pauses."""
        return None

    def promote(self, trial: str) -> Judgement:
        """Raises SearchError: the stopping variant never pauses, so never promotes."""
        raise SearchError(f"trial {trial!r}: the stopping variant of ASHA never promotes")

    def paused(self) -> dict[str, int]:
        """Always empty."""
        return {}

    def finish(self) -> list[Judgement]:
        """Nothing is paused, so nothing to stop."""
        return []

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ASHA":
        """Rebuild from :meth:`state_dict` output. Raises SearchError: another kind/version."""
        return super().from_state(state)  # type: ignore[return-value]
