"""Keep every slot's Ray actor for the sweep's next trial while no trial waits for it.

Ray Tune reuses a finished trial's actor (``reuse_actors=True``) only for a trial already
waiting with the same resources; with none waiting it keeps one actor in all and ends the
others (``TuneController._maybe_cache_trial_actor``, its ``_ObjectCache(may_keep_one=True)``).
In a mutune sweep nothing waits at exactly those moments: the driver proposes a trial only for
a free slot, and a joined group's trials (a width's confirmation design, the gate's round) are
made after that width's last trial ends. So at the end of each width the second slot's actor
was ended, and the design's and the gate round's trials then ran one at a time on the one
kept actor — a new actor cost a process start and the imports of Ray Tune, torch and
``torch._dynamo`` (seconds; ``torch._dynamo`` is no longer imported,
mutune/proxies/eager_optim.py) against a fraction of a second per design trial
(benchmarks/results/README.md has the quickstart's figures).

:func:`keep_actors` raises Tune's cache bound for the sweep's trial resources by the driver's
concurrency (the slots), so up to that many finished actors stay cached between trials and
each new trial starts on one (Tune's ``reset_config``), as it does within a width. The cached
actors hold the slots' resources, which only the sweep's own trials (same resources) ask
for; Tune ends them when the run ends (``TuneController.cleanup``).

The cache is Ray Tune's private state: where this Ray has no such cache (another version),
:func:`keep_actors` changes nothing and says so, and the sweep runs as Tune decides.
"""
from __future__ import annotations

from typing import Any

__all__ = ["keep_actors"]


def keep_actors(tune_controller: Any, resources: Any, slots: int) -> bool:
    """Let Ray Tune keep up to ``slots`` finished actors with ``resources`` for later trials.

    Args:
        tune_controller: the run's ``TuneController`` (a scheduler hook's argument).
        resources: the trials' ``PlacementGroupFactory`` (``Trial.placement_group_factory``).
        slots: trials running at once at most (the driver's concurrency), >= 1.
    Returns:
        True when the bound was raised; False when this Ray Tune has no actor cache of the
        known shape (nothing changed).
    """
    cache = getattr(tune_controller, "_actor_cache", None)
    if cache is None or not callable(getattr(cache, "increase_max", None)):
        return False
    cache.increase_max(resources, by=max(int(slots), 1))
    return True
