"""Asynchronous Hyperband: one ASHA core per bracket, trials assigned to brackets by a seed.

Li et al. 2018, "Hyperband", JMLR, §3, run asynchronously as in Li et al. 2020 (ASHA), §3."""
from __future__ import annotations

from typing import Any

import numpy as np

from mutune.errors import SearchError
from mutune.search.schedulers.asha import ASHA
from mutune.search.schedulers.inputs import check_step, check_trial, check_value
from mutune.search.schedulers.contract import Decision, Judgement, Scheduler
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.schedulers.rungs import bracket_count, check_mode, rung_milestones

VARIANTS = ("stopping", "promotion")

__all__ = ["Hyperband", "bracket_sizes"]

_CHUNK_CYCLES = 1  # cycles generated at once (each is already ≥ s_max + 1 entries)


def bracket_sizes(grace_period: int, reduction_factor: int, max_t: int) -> list[int]:
    """Trials per cycle for bracket s: ⌈(s_max + 1)·η^{s'} / (s' + 1)⌉, s' = s_max − s (Li et al.
    2018, Algorithm 1), in exact integers.

    Raises:
        SearchError: r < 1, η < 2, max_t < r, or a non-integer setting."""
    n_brackets = bracket_count(grace_period, reduction_factor, max_t)
    s_max = n_brackets - 1
    out = []
    for s in range(n_brackets):
        sp = s_max - s
        num = (s_max + 1) * reduction_factor ** sp
        out.append(-(-num // (sp + 1)))
    return out


class Hyperband(Scheduler):
    """Asynchronous Hyperband core (stopping or promotion variant in each bracket).

    Raises:
        SearchError: a setting out of range (names it, its value and the rule)."""

    STATE_VERSION = 2   # 2 added "variant"; version 1 states load as stopping

    def __init__(self, *, grace_period: int, reduction_factor: int, max_t: int,
                 mode: str = "min", seed: int = 0, variant: str = "stopping") -> None:
        if variant not in VARIANTS:
            raise SearchError(f"variant = {variant!r}: must be one of {VARIANTS}")
        check_mode(mode)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise SearchError(f"seed = {seed!r}: must be an integer >= 0")
        self.milestones = rung_milestones(grace_period, reduction_factor, max_t)
        self.grace_period, self.reduction_factor, self.max_t = (grace_period, reduction_factor,
                                                                 max_t)
        self.mode, self.seed, self.variant = mode, seed, variant
        self.s_max = len(self.milestones) - 1
        core = ASHA if variant == "stopping" else PromotionASHA
        self.brackets: list[ASHA | PromotionASHA] = [
            core(grace_period=grace_period * reduction_factor ** s,
                 reduction_factor=reduction_factor, max_t=max_t, mode=mode)
            for s in range(self.s_max + 1)]
        self.sizes = bracket_sizes(grace_period, reduction_factor, max_t)
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 4]))
        self._sequence: list[int] = []
        self._assigned: dict[str, int] = {}

    def _extend(self) -> None:
        cycle = np.repeat(np.arange(self.s_max + 1), self.sizes)
        self._rng.shuffle(cycle)
        self._sequence.extend(int(s) for s in cycle)

    def assign(self, trial: str) -> int:
        """The bracket s of ``trial``, assigning the next one of the seeded sequence if new."""
        s = self._assigned.get(trial)
        if s is None:
            i = len(self._assigned)
            while i >= len(self._sequence):
                self._extend()
            s = self._assigned[trial] = self._sequence[i]
        return s

    def bracket_of(self, trial: str) -> int | None:
        """The bracket of ``trial``, or None if it was never assigned."""
        return self._assigned.get(trial)

    def milestones_of(self, trial: str) -> list[int]:
        return list(self.brackets[self.assign(trial)].milestones)

    def next_milestone(self, trial: str, step: int) -> int:
        """The next step ``trial`` is judged at after ``step`` (an unassigned trial: bracket 0)."""
        s = self._assigned.get(trial, 0)
        return next((m for m in self.brackets[s].milestones if m > step), self.max_t)

    def on_report(self, trial: str, step: int, value: float) -> list[Judgement]:
        """Judge a report in ``trial``'s bracket (inputs checked before a bracket is assigned)."""
        trial = check_trial(trial)
        step, value = check_step(trial, step), check_value(trial, value)
        return self.brackets[self.assign(trial)].on_report(trial, step, value)

    def ended(self, trial: str) -> Decision | None:
        s = self._assigned.get(trial)
        return None if s is None else self.brackets[s].ended(trial)

    def candidate(self) -> Judgement | None:
        """The paused trial to promote (highest milestone, lowest bracket), or None."""
        best = None
        for b in self.brackets:
            c = b.candidate()
            if c is not None and (best is None or c.milestone > best.milestone):
                best = c
        return best

    def promote(self, trial: str) -> Judgement:
        """Promote paused ``trial`` in its bracket; SearchError if stopping variant or not
        promotable."""
        s = self._assigned.get(trial)
        if self.variant != "promotion" or s is None:
            raise SearchError(f"trial {trial!r} cannot be promoted (variant {self.variant}, "
                              f"bracket {s})")
        return self.brackets[s].promote(trial)

    def paused(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.brackets:
            out.update(b.paused())
        return out

    def finish(self) -> list[Judgement]:
        """End of sweep: stop every paused trial in every bracket (none left paused)."""
        return [j for b in self.brackets for j in b.finish()]

    def rung_values(self) -> dict[int, dict[str, float]]:
        """Milestone → {trial: value judged there}, merged over brackets (a copy)."""
        out: dict[int, dict[str, float]] = {m: {} for m in self.milestones}
        for b in self.brackets:
            for m, vals in b.rung_values().items():
                out[m].update(vals)
        return out

    def bracket_rung_values(self) -> list[dict[int, dict[str, float]]]:
        """Per bracket s: milestone → {trial: value} (copies)."""
        return [b.rung_values() for b in self.brackets]

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: settings, each bracket's state, assignments (the RNG re-seeded on load)."""
        return {"version": self.STATE_VERSION, "kind": "hyperband",
                "grace_period": self.grace_period, "reduction_factor": self.reduction_factor,
                "max_t": self.max_t, "mode": self.mode, "seed": self.seed,
                "variant": self.variant, "assigned": [[t, s] for t, s in self._assigned.items()],
                "brackets": [b.state_dict() for b in self.brackets]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Hyperband":
        """Rebuild from :meth:`state_dict`; SearchError: unknown version/kind or a seed mismatch."""
        if state.get("version") not in (1, cls.STATE_VERSION) or state.get("kind") != "hyperband":
            raise SearchError(f"cannot load scheduler state version {state.get('version')!r} "
                              f"kind {state.get('kind')!r}")
        variant = state.get("variant", "stopping")
        obj = cls(grace_period=state["grace_period"],
                  reduction_factor=state["reduction_factor"], max_t=state["max_t"],
                  mode=state["mode"], seed=state["seed"], variant=variant)
        for trial, s in state["assigned"]:  # a list: JSON object key order is not kept everywhere
            if obj.assign(trial) != int(s):
                raise SearchError(f"saved bracket {s} of trial {trial!r} disagrees with seed "
                                  f"{state['seed']}: the state was edited or the seed changed")
        core = ASHA if variant == "stopping" else PromotionASHA
        obj.brackets = [core.from_state(b) for b in state["brackets"]]
        return obj
