"""Replay a scheduler on recorded learning curves, training nothing (docs/architecture.md §4, §9).
"""
from __future__ import annotations

import bisect
import heapq
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mutune.errors import SearchError
from mutune.search.best import BestTrial, best_at_rung
from mutune.search.driver import ActionKind, Group, Outcome, SweepDriver
from mutune.search.schedulers.asha import ASHA
from mutune.search.schedulers.contract import Decision, Scheduler
from mutune.search.schedulers.hyperband import Hyperband
from mutune.search.schedulers.inputs import check_step, check_value
from mutune.search.searchers.simple import FixedSearcher

__all__ = ["ReplaySettings", "ReplayDecision", "Censored", "ReplayResult", "replay",
           "replay_in_order", "CENSORED_TREATMENT", "SCHEDULER_KINDS"]

SCHEDULER_KINDS = ("asha", "hyperband")

#: How decisions on missing data are treated (also returned with every result).
CENSORED_TREATMENT = ("censored: the trial is ended at its last recorded report; it enters no "
                      "further rung and is billed device time up to that report only")


@dataclass(frozen=True)
class ReplaySettings:
    """Scheduler settings of a replay: kind (``asha``/``hyperband``), r, η, max_t (steps),
    mode, and the sweep seed (Hyperband's bracket assignment)."""
    grace_period: int
    reduction_factor: int
    max_t: int
    kind: str = "asha"
    mode: str = "min"
    seed: int = 0

    def build(self) -> ASHA | Hyperband:
        """A fresh scheduler core.

        Raises:
            SearchError: unknown kind or a setting out of range."""
        if self.kind == "asha":
            return ASHA(grace_period=self.grace_period, reduction_factor=self.reduction_factor,
                        max_t=self.max_t, mode=self.mode)
        if self.kind == "hyperband":
            return Hyperband(grace_period=self.grace_period,
                             reduction_factor=self.reduction_factor, max_t=self.max_t,
                             mode=self.mode, seed=self.seed)
        raise SearchError(f"scheduler kind = {self.kind!r}: must be one of {SCHEDULER_KINDS}")


class ReplayDecision(NamedTuple):
    """One replayed judgement: ``trial`` at rung ``milestone`` (steps) with ``value`` against
    ``cutoff``; ``time`` is the simulated second (None in recorded order), ``seq`` the recorded
    sequence number of the report judged (None on the simulated clock)."""
    trial: str
    milestone: int
    value: float
    cutoff: float | None
    decision: Decision
    time: float | None
    seq: int | None


class Censored(NamedTuple):
    """A trial ended for lack of data: its last recorded step, and the step (next rung or
    max_t) the replayed scheduler would have let it reach."""
    trial: str
    last_step: int
    needed_step: int


@dataclass
class ReplayResult:
    """What a replayed scheduler decided and spent."""
    decisions: list[ReplayDecision]
    statuses: dict[str, str]
    best: BestTrial | None
    wall_s: float | None
    device_s: float
    censored: list[Censored]
    held_s: dict[str, float]
    scheduler: Any = field(repr=False)
    treatment: str = CENSORED_TREATMENT

    @property
    def missing_data_decisions(self) -> int:
        """How many decisions had no data (one per censored trial)."""
        return len(self.censored)


def _best(core: Scheduler, mode: str) -> BestTrial | None:
    try:
        return best_at_rung(core.rung_values(), mode=mode, min_trials=3)
    except SearchError:
        return None


def _needed(milestones: Sequence[int], last_step: int, max_t: int) -> int:
    i = bisect.bisect_right(milestones, last_step)
    return milestones[i] if i < len(milestones) else max_t


_STEP, _VALUE, _SECONDS = (operator.itemgetter(i) for i in range(3))
_ROWS, _NUMBERS = {tuple, list}, {float, int}


def _check(key: str, curve: Sequence[Any]) -> Sequence[Any]:
    """The curve if every report is (step, value, seconds) with integer steps ≥ 1 strictly
    increasing and real values and seconds; else SearchError naming the trial, the report and the
    field (never an IndexError, never a silently truncated step)."""
    try:
        steps = list(map(_STEP, curve))
        fast = (set(map(type, curve)) <= _ROWS and set(map(len, curve)) == {3}
                and set(map(type, steps)) == {int} and steps[0] >= 1
                and all(map(operator.lt, steps, steps[1:]))
                and set(map(type, map(_VALUE, curve))) <= _NUMBERS
                and set(map(type, map(_SECONDS, curve))) <= _NUMBERS)
    except (TypeError, IndexError, KeyError):
        fast = False
    if fast:
        return curve
    out: list[tuple[int, float, float]] = []
    for n, rep in enumerate(curve):
        if not isinstance(rep, (tuple, list)) or len(rep) != 3:
            raise SearchError(f"curve of trial {key!r}, report {n}: {rep!r}: each report must "
                              "be (step, value, seconds)")
        step = check_step(key, rep[0], field=f"report {n} step")
        value = check_value(key, rep[1], field=f"report {n} value")
        seconds = check_value(key, rep[2], field=f"report {n} seconds")
        if out and step <= out[-1][0]:
            raise SearchError(f"curve of trial {key!r}: report {n} at step {step} after step "
                              f"{out[-1][0]}; steps must be strictly increasing")
        out.append((step, value, seconds))
    return out


def _plan(curve: Sequence[Sequence[float]], milestones: Sequence[int], max_t: int) -> list[int]:
    """Indices of the reports the driver sees (each milestone's, then the last), reversed."""
    n = len(curve)
    last = bisect.bisect_left(curve, max_t, key=_STEP)
    if last >= n:
        last = n - 1
    if not math.isfinite(sum(map(_VALUE, curve[:last + 1]))):
        for j in range(last + 1):
            if not math.isfinite(curve[j][1]):
                last = j
                break
    plan: list[int] = []
    for m in milestones:
        j = bisect.bisect_left(curve, m, lo=plan[-1] if plan else 0, key=_STEP)
        if j > last:
            break
        if not plan or plan[-1] != j:
            plan.append(j)
    if not plan or plan[-1] != last:
        plan.append(last)
    plan.reverse()  # pop() from the end
    return plan


def _deliver(heap: list[tuple[float, int, int]], keys: list[str],
             data: list[Sequence[Sequence[float]]], plans: list[list[int]], starts: list[float],
             report: Callable[..., Outcome], decisions: list[ReplayDecision],
             finish: Callable[[int, int, str], None], start: Callable[[float], None],
             failed: set[str]) -> None:
    """Hand the driver each pending report in time order, ending and starting trials."""
    heappop, heappush = heapq.heappop, heapq.heappush
    while heap:
        t, i, j = heappop(heap)
        key = keys[i]
        step, value, _ = data[i][j]
        plan = plans[i]
        plan.pop()
        out = report(key, step, value)
        for jd in out.judgements:
            decisions.append(ReplayDecision(key, jd.milestone, jd.value, jd.cutoff,
                                            jd.decision, t, None))
        if out.action == "end":
            status = out.status
        elif plan:
            nj = plan[-1]
            heappush(heap, (starts[i] + data[i][nj][2], i, nj))
            continue
        else:
            status = "failed" if key in failed else "censored"
        finish(i, j, status)
        start(t)


def _driver(settings: ReplaySettings, keys: list[str], concurrency: int) -> SweepDriver:
    """One group holding the recorded trials, in arrival order, under the replayed core."""
    return SweepDriver([Group("replay", FixedSearcher([{} for _ in keys]), settings.build(),
                              settings.max_t, key_of=keys.__getitem__)],
                       concurrency=concurrency)


def replay(curves: Mapping[str, Sequence[Sequence[float]]], settings: ReplaySettings, *,
           concurrency: int = 1, failed: Iterable[str] = ()) -> ReplayResult:
    """Re-simulate ``settings``' scheduler on recorded curves with ``concurrency`` workers.

    Raises:
        SearchError: concurrency < 1, bad settings, or a malformed curve (naming the trial,
            the report and the field)."""
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise SearchError(f"concurrency = {concurrency!r}: must be an integer >= 1")
    keys = list(curves)
    if not keys:
        core = settings.build()
        return ReplayResult([], {}, None, 0.0, 0.0, [], {}, core)
    driver = _driver(settings, keys, concurrency)
    core = driver.groups["replay"].core
    milestones_for = core.milestones_of
    max_t = settings.max_t
    failed = set(failed)
    index = {k: i for i, k in enumerate(keys)}
    plans: list[list[int]] = [None] * len(keys)  # type: ignore[list-item]
    starts = [0.0] * len(keys)
    data: list[Sequence[Sequence[float]]] = [None] * len(keys)  # type: ignore[list-item]
    statuses: dict[str, str] = {}
    held_s: dict[str, float] = {}
    decisions: list[ReplayDecision] = []
    censored: list[Censored] = []
    heap: list[tuple[float, int, int]] = []
    START = ActionKind.START
    device_s = wall_s = 0.0

    def finish(i: int, j: int, status: str) -> None:
        """End trial i after its report j (j = -1: no report)."""
        nonlocal device_s, wall_s
        key = keys[i]
        curve = data[i]
        held = float(curve[j][2]) if j >= 0 else 0.0
        device_s += held
        held_s[key] = held
        statuses[key] = status
        if status in ("censored", "failed"):
            driver.ended(key, status)
        if status == "censored":
            last = int(curve[j][0]) if j >= 0 else 0
            censored.append(Censored(key, last, _needed(milestones_for(key), last, max_t)))
        if starts[i] + held > wall_s:
            wall_s = starts[i] + held

    def start(t: float) -> None:
        """Start trials at time t until one has a pending report or the driver says wait."""
        while True:
            act = driver.next_action()
            if act.kind is not START:
                return
            key = act.key
            i = index[key]
            curve = data[i] = _check(key, curves[key])
            starts[i] = t
            if len(curve) == 0:
                finish(i, -1, "failed" if key in failed else "censored")
                continue
            plans[i] = plan = _plan(curve, milestones_for(key), max_t)
            heapq.heappush(heap, (t + curve[plan[-1]][2], i, plan[-1]))
            return

    for _ in range(concurrency):
        start(0.0)
    _deliver(heap, keys, data, plans, starts, driver.report, decisions, finish, start, failed)
    return ReplayResult(decisions, statuses, _best(core, settings.mode), wall_s, device_s,
                        censored, held_s, core)


def replay_in_order(reports: Iterable[Sequence[Any]], settings: ReplaySettings, *,
                    failed: Iterable[str] = ()) -> ReplayResult:
    """Feed recorded reports to ``settings``' scheduler in the given (recorded) order.

    Raises:
        SearchError: bad settings, a malformed report (naming the trial and the field), or a
            report out of step order for its trial."""
    rows = []
    for n, rep in enumerate(reports):
        if not isinstance(rep, (tuple, list)) or len(rep) not in (4, 5):
            raise SearchError(f"report {n}: {rep!r}: must be (seq, trial, step, value) or "
                              "(seq, trial, step, value, seconds)")
        key = str(rep[1])
        step = check_step(key, rep[2])
        value = check_value(key, rep[3])
        seconds = check_value(key, rep[4], field="seconds") if len(rep) > 4 else 0.0
        rows.append((rep[0], key, step, value, seconds))
    keys = list(dict.fromkeys(r[1] for r in rows))
    if not keys:
        return ReplayResult([], {}, None, None, 0.0, [], {}, settings.build())
    driver = _driver(settings, keys, len(keys))
    core = driver.groups["replay"].core
    max_t = settings.max_t
    failed = set(failed)
    decisions: list[ReplayDecision] = []
    last: dict[str, tuple[int, float]] = {}
    for seq, key, step, value, seconds in rows:
        if key not in driver.trials:
            act = driver.next_action()
            if act.key != key:   # pragma: no cover - keys are in first-report order
                raise SearchError(f"replay started {act.key!r} where {key!r} reported")
        if driver.trials[key].state == "ended":
            continue
        prev = last.get(key)
        if prev is not None and step <= prev[0]:
            raise SearchError(f"trial {key!r}: report at step {step} (seq {seq}) after step "
                              f"{prev[0]}; reports must come in step order")
        last[key] = (step, seconds)
        for jd in driver.report(key, step, value).judgements:
            decisions.append(ReplayDecision(key, jd.milestone, jd.value, jd.cutoff,
                                            jd.decision, None, seq))
    statuses: dict[str, str] = {}
    censored = []
    for key, (step, _) in last.items():
        st = driver.status(key)
        if st is None:
            if key in failed:
                driver.ended(key, "failed")
                statuses[key] = "failed"
            else:
                driver.ended(key, "censored")
                statuses[key] = "censored"
                censored.append(Censored(key, step, _needed(core.milestones_of(key), step,
                                                            max_t)))
        else:
            statuses[key] = st[0]
    held_s = {k: s for k, (_, s) in last.items()}
    return ReplayResult(decisions, statuses, _best(core, settings.mode), None,
                        sum(held_s.values()), censored, held_s, core)
