"""The simulated backend: the driver loop on synthetic learning curves and a simulated clock."""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mutune.errors import SearchError
from mutune.search.driver import ActionKind, Group, SweepDriver
from mutune.search.schedulers.contract import Judgement, Scheduler
from mutune.search.searchers.base import Searcher
from mutune.search.searchers.simple import FixedSearcher

__all__ = ["SimResult", "simulate", "feed_events", "power_law_curve"]


@dataclass
class SimResult:
    """A finished simulation."""
    statuses: dict[str, str]
    decisions: list[Judgement]
    reports: list[tuple[str, int, float]]
    wall_s: float
    max_running: int
    last_step: dict[str, int] = field(default_factory=dict)
    events: list[tuple] = field(default_factory=list)
    driver: Any = None


def _checked_searcher(searcher: Searcher | None, num_samples: int | None, concurrency: int,
                      max_t: int, report_every: int) -> Searcher:
    """``searcher``, or one proposing ``num_samples`` indexed points; the settings checked."""
    for name, v in (("concurrency", concurrency), ("max_t", max_t),
                    ("report_every", report_every)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SearchError(f"{name} = {v!r}: must be an integer >= 1")
    if searcher is not None:
        return searcher
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples < 1:
        raise SearchError(f"num_samples = {num_samples!r}: must be an integer >= 1")
    return FixedSearcher([{} for _ in range(num_samples)])


def _terminal_statuses(driver: SweepDriver, keys: list[str], core: Scheduler | None
                       ) -> dict[str, str | None]:
    """Trial key → its terminal status; SearchError when a trial is left running or paused."""
    statuses = {k: t.status for k, t in driver.trials.items() if t.state == "ended"}
    left = [k for k in keys if k not in statuses]
    if left or (core is not None and core.paused()):
        raise SearchError(f"trials left without a terminal state: {left[:10]}")
    return statuses


def simulate(core: Scheduler | None, curve: Callable[..., float], *, num_samples: int | None = None,
             concurrency: int, max_t: int, report_every: int = 1,
             searcher: Searcher | None = None) -> SimResult:
    """Run a sweep of one group on ``core`` with ``concurrency`` simulated workers.

    Raises:
        SearchError: a bad argument, or the core broke the contract (e.g. left a trial paused)."""
    by_point = searcher is not None
    searcher = _checked_searcher(searcher, num_samples, concurrency, max_t, report_every)
    driver = SweepDriver([Group("sim", searcher, core, max_t)], concurrency=concurrency)
    pos: dict[str, int] = {}
    index: dict[str, int] = {}
    decisions: list[Judgement] = []
    reports: list[tuple[str, int, float]] = []
    events: list[tuple] = []
    heap: list[tuple[float, int, int]] = []   # (time of next report, arrival index, step)
    keys: list[str] = []
    max_running = 0
    now = 0.0

    def schedule(key: str, t: float) -> None:
        step = min((pos[key] // report_every + 1) * report_every, max_t)
        heapq.heappush(heap, (t + step - pos[key], index[key], step))

    def fill(t: float) -> None:
        nonlocal max_running
        while True:
            act = driver.next_action()
            if act.kind is ActionKind.PROMOTE:
                decisions.append(act.judgement)
                events.append(("promote", act.key))
            elif act.kind is ActionKind.START:
                index[act.key] = len(keys)
                keys.append(act.key)
                pos[act.key] = 0
            else:
                if act.kind is ActionKind.DONE:
                    events.append(("finish",))
                    for j in act.finished:
                        decisions.append(j)
                return
            max_running = max(max_running, driver.running)
            schedule(act.key, t)

    fill(0.0)
    while heap:
        now, i, step = heapq.heappop(heap)
        key = keys[i]
        point = driver.trials[key].point
        value = float(curve(point["hparams"], step) if by_point else curve(point["index"], step))
        pos[key] = step
        reports.append((key, step, value))
        events.append(("report", key, step, value))
        out = driver.report(key, step, value)
        decisions.extend(out.judgements)
        if out.action == "continue":
            schedule(key, now)
            continue
        fill(now)           # the trial paused or ended: its worker is free
    statuses = _terminal_statuses(driver, keys, core)
    return SimResult({k: statuses[k] for k in keys}, decisions, reports, now, max_running,
                     dict(pos), events, driver)


def feed_events(core: Scheduler, events: list[tuple]) -> list[Judgement]:
    """Feed recorded driver events (:attr:`SimResult.events`) to ``core``; returns every
    judgement in order. Used to check that a core restored from state decides as the
    uninterrupted one did for the same order.

    Raises:
        SearchError: an unknown event, or one the core rejects."""
    out: list[Judgement] = []
    for ev in events:
        if ev[0] == "report":
            out.extend(core.on_report(ev[1], ev[2], ev[3]))
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
