"""The one driver loop (:class:`SweepDriver`): start, report, decide, promote, finish.

On a free slot (Li et al. 2020, Algorithm 2: promotions first): 1. every group's promotion
candidate, highest rung first; 2. an interrupted trial of a resumed sweep; 3. a new trial of
the first admitted group with points left; 4. else ``finish()`` every core. Every report
reaches the searcher before the core judges it."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from mutune.errors import SearchError
from mutune.search.driver.types import (DIVERGE_SE, EXECUTOR_STATUSES, STATUS_OF, Action,
                                        ActionKind, Admission, Group, Outcome, TrialState,
                                        beyond_limit)
from mutune.search.schedulers.contract import Decision, Judgement, Scheduler
from mutune.search.schedulers.inputs import check_step, check_value

__all__ = ["SweepDriver"]


class SweepDriver:
    """Decide, for every backend, who runs next and what each report means.

    Raises:
        SearchError: no group, duplicate group names, or concurrency < 1."""

    def __init__(self, groups: Sequence[Group], *, concurrency: int, metric: str = "val_loss",
                 admission: Admission | None = None,
                 resume: dict[str, list[tuple[str, dict[str, Any]]]] | None = None,
                 dormant: dict[str, dict[str, dict[str, Any]]] | None = None) -> None:
        if not groups:
            raise SearchError("a sweep driver needs at least one group")
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise SearchError(f"group names must be unique, got {names}")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise SearchError(f"concurrency = {concurrency!r}: must be an integer >= 1")
        self.groups = {g.name: g for g in groups}
        #: the groups new trials are taken from, in order (joined groups included);
        #: ``given``: the groups given at the start
        self.order, self.given = list(names), tuple(names)
        self.concurrency, self.metric, self.admission = concurrency, metric, admission
        self.trials: dict[str, TrialState] = {}
        self._running = 0
        self._queue: list[str] = []
        self._done = False
        self._hooks: dict[str, Callable[[str], Sequence[Group]]] = {}
        self._joining: str | None = None      # the group whose hook is running
        self._joined = 0
        #: what the driver fed the cores, in order: ("report", group, key, step, value),
        #: ("promote", group, key), ("finish", group) — the recorded order of a sweep
        self.core_log: list[tuple[Any, ...]] = []
        for gname, items in (resume or {}).items():
            for key, point in items:
                self._adopt(key, gname, point, "pending")
                self._queue.append(key)
        for gname, paused in (dormant or {}).items():
            for key, point in paused.items():
                self._adopt(key, gname, point, "paused")

    def _adopt(self, key: str, group: str, point: dict[str, Any], state: str) -> None:
        if group not in self.groups:
            raise SearchError(f"unknown group {group!r}; groups: {self.order}")
        if key in self.trials:
            raise SearchError(f"trial {key!r} is known twice")
        self.trials[key] = TrialState(key, group, {**point, "key": key}, state)

    @property
    def running(self) -> int:
        """Trials started and not paused or ended (a backend may still be starting them)."""
        return self._running

    def _move(self, t: TrialState, state: str) -> None:
        """Change a trial's state, keeping the running count (O(1))."""
        self._running += (state == "running") - (t.state == "running")
        t.state = state

    @property
    def done(self) -> bool:
        """True once :attr:`ActionKind.DONE` was returned."""
        return self._done

    def group_of(self, key: str) -> Group:
        """The group of trial ``key``. Raises SearchError for an unknown key."""
        return self.groups[self._trial(key).group]

    def status(self, key: str) -> tuple[str, str | None] | None:
        """(status, reason) of an ended trial, None while it has not ended."""
        t = self._trial(key)
        return (t.status, t.reason) if t.state == "ended" and t.status is not None else None

    def _trial(self, key: str) -> TrialState:
        t = self.trials.get(key)
        if t is None:
            raise SearchError(f"trial {key!r} is not a trial of this sweep")
        return t

    def group_done(self, name: str) -> bool:
        """Whether group ``name`` can get no more trials and none is running, waiting or paused.

        Raises:
            SearchError: an unknown group."""
        g = self.groups.get(name)
        if g is None:
            raise SearchError(f"unknown group {name!r}; groups: {self.order}")
        if not (g.searcher.exhausted or self._budget_closed()):
            return False
        return all(t.state == "ended" for t in self.trials.values() if t.group == name)

    def when_done(self, name: str, hook: Callable[[str], Sequence[Group]]) -> None:
        """Call ``hook(name)`` once group ``name`` is done; the groups it returns join the sweep.

        Raises:
            SearchError: an unknown group (outside a hook), or one a hook did not return."""
        if name not in self.groups and self._joining is None:
            raise SearchError(f"unknown group {name!r}; groups: {self.order}")
        self._hooks[name] = hook

    def _join(self) -> None:
        for name in [n for n in self._hooks if n in self.groups and self.group_done(n)]:
            self._joining = name
            try:
                for g in list(self._hooks.pop(name)(name)):
                    self.add_group(g, first=True)
            finally:
                self._joining = None
            if any(n not in self.groups for n in self._hooks):
                raise SearchError(f"group {name!r}'s follow-up watched a group it did not add")

    def add_group(self, group: Group, *, first: bool = True) -> None:
        """Add a group while the sweep runs; its trials share the slots from the next free one."""
        if self._done:
            raise SearchError(f"group {group.name!r}: the sweep is done, no group can join")
        if group.name in self.groups:
            raise SearchError(f"group names must be unique: {group.name!r} exists")
        self.groups[group.name] = group
        if first:       # behind the groups that joined before it
            self.order.insert(self._joined, group.name)
            self._joined += 1
        else:
            self.order.append(group.name)

    def _new_trials_left(self) -> bool:
        if self._queue:
            return True
        if self.admission is not None and self.admission.closed:
            return False
        return any(not self.groups[g].searcher.exhausted for g in self.order)

    def _candidate(self) -> tuple[Group, Scheduler, Judgement] | None:
        best: tuple[Group, Scheduler, Judgement] | None = None
        for name in self.order:
            g = self.groups[name]
            c = g.core.candidate() if g.core is not None else None
            if c is not None and g.core is not None and (best is None
                                                         or c.milestone > best[2].milestone):
                best = (g, g.core, c)
        return best

    def next_action(self, *, can_start: bool = True,
                    can_promote_live: bool | Callable[[str], bool] = True,
                    can_finish_live: bool | Callable[[str], bool] = True) -> Action:
        """What to do with a free slot (the module docstring gives the order)."""
        if self._done:
            return Action(ActionKind.DONE)
        if self._hooks:
            self._join()
        if self.running >= self.concurrency:
            return Action(ActionKind.WAIT)
        cand = None if self._budget_closed() else self._candidate()
        if cand is not None:
            g, core, c = cand
            t = self._trial(c.trial)
            promotable = (can_promote_live(t.key) if callable(can_promote_live)
                          else can_promote_live)
            if (t.live and not promotable) or (not t.live and not can_start):
                return Action(ActionKind.WAIT)
            j = core.promote(c.trial)
            self.core_log.append(("promote", g.name, c.trial))
            live = t.live
            self._move(t, "running")
            t.live = True
            return Action(ActionKind.PROMOTE, t.key, g.name, dict(t.point), j, live=live)
        if self._queue:
            if not can_start:
                return Action(ActionKind.WAIT)
            t = self._trial(self._queue.pop(0))
            self._move(t, "running")
            t.live = True
            return Action(ActionKind.START, t.key, t.group, dict(t.point))
        if can_start and self._new_trials_left():
            for name in self.order:
                g = self.groups[name]
                if g.searcher.exhausted:
                    continue
                if self.admission is not None and not self.admission.admit(name):
                    break        # refused: no new trial anywhere, for good
                index = len(g.searcher.proposed)
                key = g.key(index)
                hp = g.searcher.suggest(key)
                if hp is None:
                    continue
                self._adopt(key, name, g.point(index, hp), "pending")
                t = self.trials[key]
                self._move(t, "running")
                t.live = True
                return Action(ActionKind.START, key, name, dict(t.point))
        elif self._new_trials_left():
            return Action(ActionKind.WAIT)
        if self.running:
            return Action(ActionKind.WAIT)
        live_paused = [k for k, t in self.trials.items() if t.state == "paused" and t.live]
        can_finish = (all(can_finish_live(k) for k in live_paused) if callable(can_finish_live)
                      else can_finish_live or not live_paused)
        if not can_finish:
            return Action(ActionKind.WAIT)
        return Action(ActionKind.DONE, finished=tuple(self._finish()))

    def _finish(self) -> list[Judgement]:
        out: list[Judgement] = []
        for name in self.order:
            core = self.groups[name].core
            if core is None:
                continue
            self.core_log.append(("finish", name))
            for j in core.finish():
                out.append(j)
                t = self._trial(j.trial)
                if t.state == "ended":       # cancelled while paused
                    continue
                self._end(t, "stopped", f"budget exhausted: stopped at rung {j.milestone}"
                          if self._budget_closed() else
                          f"below the rung cutoff at step {t.last_step} (paused at rung "
                          f"{j.milestone}, never promoted)")
        left = [k for k, t in self.trials.items() if t.state != "ended"]
        if left:
            raise SearchError(f"trials left without a terminal state: {left[:10]}")
        self._done = True
        return out

    def report(self, key: str, step: Any, value: Any, se: float | None = None) -> Outcome:
        """A running trial reported ``value`` (``se``: its standard error) at ``step``: judge it.

        Raises:
            SearchError: a malformed step or value, an unknown trial, or one not running."""
        t = self._trial(key)
        step = check_step(key, step)
        value = check_value(key, value, field=self.metric)
        if t.state != "running":
            raise SearchError(f"trial {key!r} reported at step {step} while {t.state}"
                              + (f" ({t.status})" if t.status else ""))
        g = self.groups[t.group]
        t.last_step = step
        g.searcher.observe(key, step, value)
        js: list[Judgement] = []
        if g.core is not None:
            self.core_log.append(("report", g.name, key, step, value))
            js = g.core.on_report(key, step, value)
        last = js[-1].decision if js else None
        if last is Decision.DIVERGED or (g.core is None and not math.isfinite(value)):
            return self._ended_by(t, js, "diverged", f"non-finite {self.metric}")
        limit = (g.diverge_above or {}).get(step)
        if limit is not None and beyond_limit(value, se, limit):
            noise = f" ± {se:.2g}" if se is not None and math.isfinite(se) else ""
            return self._ended_by(t, js, "diverged",
                                  f"{self.metric} {value:.4g}{noise} at step {step} is above "
                                  f"{limit:.4g} by more than {DIVERGE_SE:g} of its standard "
                                  "errors (the limit: twice the best proxy's loss at that step "
                                  "plus three of its standard errors)")
        if last is Decision.STOP:
            return self._ended_by(t, js, "stopped", f"below the rung cutoff at step {step}")
        if (g.core is not None and g.core.completed(key)) or (g.core is None
                                                              and step >= g.max_t):
            return self._ended_by(t, js, "completed", None)
        if last is Decision.PAUSE:   # with the budget closed it is never promoted again
            self._move(t, "paused")
            return Outcome(js, "pause")
        if js and self._budget_closed():
            return self._ended_by(t, js, "stopped",
                                  f"budget exhausted: stopped at rung {js[-1].milestone}")
        return Outcome(js, "continue")

    def _budget_closed(self) -> bool:
        return self.admission is not None and self.admission.closed

    def _ended_by(self, t: TrialState, js: list[Judgement], status: str,
                  reason: str | None) -> Outcome:
        self._end(t, status, reason)
        return Outcome(js, "end", status, reason)

    def _end(self, t: TrialState, status: str, reason: str | None) -> None:
        self._move(t, "ended")
        t.status, t.reason = status, reason
        told = status if status in STATUS_OF.values() else "failed"
        self.groups[t.group].searcher.complete(t.key, told)

    def requeue(self, key: str, point: dict[str, Any]) -> None:
        """A preempted trial waits first in line and restarts under its key (no decision).

        Raises:
            SearchError: an unknown trial, or one that is not running."""
        t = self._trial(key)
        if t.state != "running":
            raise SearchError(f"trial {key!r} is {t.state}: only a running trial can be "
                              "preempted and requeued")
        t.point = {**point, "key": key}
        self._move(t, "pending")
        self._queue.insert(0, key)

    def ended(self, key: str, status: str, reason: str | None = None) -> bool:
        """The backend ended trial ``key`` with ``status``; False if the driver had ended it
        already.

        Raises:
            SearchError: an unknown trial or status."""
        if status not in EXECUTOR_STATUSES:
            raise SearchError(f"status = {status!r}: a backend may end a trial only as one of "
                              f"{EXECUTOR_STATUSES}")
        t = self._trial(key)
        if t.state == "ended":
            return False
        self._end(t, status, reason)   # a paused one (cancelled) stays paused in its core
        return True
