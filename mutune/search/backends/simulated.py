"""Drive any scheduler core on synthetic learning curves with a simulated clock.

The same cores the live sweep uses (stopping or promotion ASHA, Hyperband) run here against a
deterministic ``curve(trial_index, step) -> value`` with ``concurrency`` simulated workers, one
simulated second per training step (Syne Tune's simulator-backend idea). It is the executor the
scheduler contract tests share: every sweep must end with every trial in a terminal state.

Workers follow Li et al. 2020, Algorithm 2: whenever a worker is free, promote the scheduler's
candidate (resuming the paused trial at the step it paused), else start the next new trial, else
stay idle. When nothing runs and nothing is promotable, :meth:`finish` stops the paused trials.
Events are ordered by (time, trial arrival index), so a simulation is deterministic.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mutune.errors import SearchError
from mutune.search.schedulers.asha import Decision, Judgement

__all__ = ["SimResult", "simulate", "feed_events", "power_law_curve"]


@dataclass
class SimResult:
    """A finished simulation.

    Attributes:
        statuses: trial key (``t0``, ``t1``, …) → ``completed``/``stopped``/``diverged``.
        decisions: every judgement in the order made (pauses, promotions, final stops).
        reports: (trial, step, value) in the order fed to the core.
        wall_s: simulated seconds until the last trial ended.
        max_running: the most trials running at once (≤ concurrency).
        last_step: trial → the last step it trained to.
        events: what the driver fed the core, in order: ``("report", trial, step, value)``,
            ``("promote", trial)`` and a final ``("finish",)`` — :func:`feed_events` replays
            them (the recorded order of DESIGN.md §4).
    """
    statuses: dict[str, str]
    decisions: list[Judgement]
    reports: list[tuple[str, int, float]]
    wall_s: float
    max_running: int
    last_step: dict[str, int] = field(default_factory=dict)
    events: list[tuple] = field(default_factory=list)


def simulate(core: Any, curve: Callable[[int, int], float], *, num_samples: int,
             concurrency: int, max_t: int, report_every: int = 1,
             on_end: Callable[[str, str], None] | None = None) -> SimResult:
    """Run ``num_samples`` trials on ``core`` with ``concurrency`` workers.

    Args:
        core: a scheduler core (fresh, or restored from state with no trial running).
        curve: value of trial number i at training step s (any float; NaN/inf allowed).
        num_samples: trials to start in total (≥ 1).
        concurrency: workers (≥ 1).
        max_t: steps a trial trains at most.
        report_every: a report every this many steps and at max_t (reports need not hit
            milestones: a report past one is judged there).
        on_end: called with (trial, status) as each trial ends (e.g. a searcher's
            ``complete``, so a model-based searcher learns during the sweep).
    Returns:
        :class:`SimResult`; every trial is in a terminal state.
    Raises:
        SearchError: a bad argument, or the core broke the contract (e.g. left a trial paused).
    """
    for name, v in (("num_samples", num_samples), ("concurrency", concurrency),
                    ("max_t", max_t), ("report_every", report_every)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SearchError(f"{name} = {v!r}: must be an integer >= 1")
    keys = [f"t{i}" for i in range(num_samples)]
    index = {k: i for i, k in enumerate(keys)}
    pos = dict.fromkeys(keys, 0)
    statuses: dict[str, str] = {}
    decisions: list[Judgement] = []
    reports: list[tuple[str, int, float]] = []
    events: list[tuple] = []
    heap: list[tuple[float, int, int]] = []   # (time of next report, trial index, step)
    running = 0
    max_running = 0
    next_new = 0
    now = 0.0

    def schedule(i: int, t: float) -> None:
        step = min((pos[keys[i]] // report_every + 1) * report_every, max_t)
        heapq.heappush(heap, (t + step - pos[keys[i]], i, step))

    def fill(t: float) -> None:
        nonlocal running, max_running, next_new
        while running < concurrency:
            cand = core.candidate()
            if cand is not None:
                decisions.append(core.promote(cand.trial))
                events.append(("promote", cand.trial))
                i = index[cand.trial]
            elif next_new < num_samples:
                i = next_new
                next_new += 1
            else:
                return
            running += 1
            max_running = max(max_running, running)
            schedule(i, t)

    fill(0.0)
    while heap:
        now, i, step = heapq.heappop(heap)
        key = keys[i]
        value = float(curve(i, step))
        pos[key] = step
        reports.append((key, step, value))
        events.append(("report", key, step, value))
        js = core.on_report(key, step, value)
        decisions.extend(js)
        last = js[-1].decision if js else Decision.CONTINUE
        if last in (Decision.STOP, Decision.DIVERGED):
            statuses[key] = "stopped" if last is Decision.STOP else "diverged"
        elif last is Decision.PAUSE:
            pass
        elif step >= max_t:
            statuses[key] = "completed"
        else:
            schedule(i, now)
            continue
        if on_end is not None and key in statuses:
            on_end(key, statuses[key])
        running -= 1
        fill(now)
    events.append(("finish",))
    for j in core.finish():
        decisions.append(j)
        statuses[j.trial] = "stopped"
        if on_end is not None:
            on_end(j.trial, "stopped")
    left = [k for k in keys if k not in statuses]
    if left or core.paused():
        raise SearchError(f"trials left without a terminal state: {left[:10]}")
    return SimResult({k: statuses[k] for k in keys}, decisions, reports, now, max_running,
                     dict(pos), events)


def feed_events(core: Any, events: list[tuple]) -> list[Judgement]:
    """Feed recorded driver events (:attr:`SimResult.events`) to ``core``; returns every
    judgement in order. Used to check that a core restored from state decides as the
    uninterrupted one did for the same order.

    Raises:
        SearchError: an unknown event, or one the core rejects.
    """
    out: list[Judgement] = []
    for ev in events:
        if ev[0] == "report":
            out.extend(core.on_report(ev[1], int(ev[2]), float(ev[3])))
        elif ev[0] == "promote":
            out.append(core.promote(ev[1]))
        elif ev[0] == "finish":
            out.extend(core.finish())
        else:
            raise SearchError(f"unknown driver event {ev!r}")
    return out


def power_law_curve(seed: int) -> Callable[[int, int], float]:
    """A deterministic family of decreasing curves a_i + b_i/√s, with a_i, b_i drawn from a
    generator seeded by (seed, i) — for tests and examples."""
    import numpy as np

    cache: dict[int, tuple[float, float]] = {}

    def f(i: int, step: int) -> float:
        if i not in cache:
            rng = np.random.default_rng(np.random.SeedSequence([seed, i]))
            cache[i] = (float(rng.uniform(0.1, 1.0)), float(rng.uniform(0.5, 2.0)))
        a, b = cache[i]
        return a + b / math.sqrt(step)
    return f
