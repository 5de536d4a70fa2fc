"""The steps a sweep is planned to train, before it runs (``mutune run --dry-run``)."""
from __future__ import annotations

from mutune.search.schedulers.hyperband import Hyperband
from mutune.search.schedulers.rungs import rung_milestones

__all__ = ["planned_trial_steps", "DEFAULT_TRIAL_OVERHEAD_S", "DEFAULT_REPORT_OVERHEAD_S"]

#: Assumed Ray per-trial start-up + teardown, seconds, until one is measured; with actors
#: reused between trials it is small. Each report costs more (:data:`DEFAULT_REPORT_OVERHEAD_S`).
#: Both are a least-squares fit of a quickstart run's (allocated − steps − evaluations)
#: against the reports each trial made (benchmarks/results/README.md, "Assumed overheads").
#: Used by the dry run and the budget.
DEFAULT_TRIAL_OVERHEAD_S = 0.05

#: Assumed seconds per report beyond the evaluation: Ray Tune's function trainable waits in
#: ``report`` until the controller has taken the result (its callbacks, the database write)
#: and asks for the next one, so every report is a round trip to the driver (fitted as
#: above).
DEFAULT_REPORT_OVERHEAD_S = 0.04


def _halving(n: int, milestones: list[int], eta: int, max_t: int) -> list[int]:
    steps: list[int] = []
    alive = n
    for k, m in enumerate(milestones):
        nxt = max(alive // eta, 1) if alive > 1 else alive
        last = k == len(milestones) - 1
        cut = alive - nxt if not (last and m == max_t) else 0
        steps += [m] * cut
        alive -= cut
        if last:
            steps += [max_t] * alive
    return steps


def planned_trial_steps(n: int, *, kind: str, grace_period: int, reduction_factor: int,
                        max_t: int, seed: int = 0) -> list[int]:
    """Training steps of each of ``n`` trials under the scheduler, sorted ascending."""
    ms = rung_milestones(grace_period, reduction_factor, max_t)
    if kind != "hyperband":
        return sorted(_halving(n, ms, reduction_factor, max_t))
    core = Hyperband(grace_period=grace_period, reduction_factor=reduction_factor,
                     max_t=max_t, seed=seed)
    brackets = [core.assign(f"t{i}") for i in range(n)]
    out: list[int] = []
    for s in range(len(ms)):
        n_s = brackets.count(s)
        if n_s:
            out += _halving(n_s, ms[s:], reduction_factor, max_t)
    return sorted(out)
