"""The steps a sweep is planned to train (``mutune run --dry-run``): synchronous halving, n_{k+1} =
max(⌊n_k/η⌋, 1), as ASHA's expectation (Li et al. 2020); Hyperband brackets as the live core."""
from __future__ import annotations

from mutune.search.schedulers.hyperband import Hyperband
from mutune.search.schedulers.rungs import rung_milestones

__all__ = ["planned_trial_steps", "DEFAULT_TRIAL_OVERHEAD_S", "DEFAULT_REPORT_OVERHEAD_S"]

#: Assumed Ray per-trial start-up + teardown, seconds, until one is measured (fitted on a
#: quickstart run: benchmarks/results/README.md, "Assumed overheads").
DEFAULT_TRIAL_OVERHEAD_S = 0.05

#: Assumed seconds per report beyond the evaluation (a round trip to the driver; fitted as above).
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
    """Training steps of each of ``n`` trials under the scheduler, sorted ascending.

    Raises:
        SearchError: invalid r, η, max_t (from :func:`rung_milestones`)."""
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
