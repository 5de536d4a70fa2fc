"""Groups that join a running run: when one group is done, a follow-up (e.g. that width's
confirmation design) starts in the slots the other groups leave free, instead of waiting for
the whole run to end and paying a new run's start-up."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mutune.errors import SearchError
from mutune.search.backends.groups import (GroupSpec, RunOutcome, driver_group,
                                                    finished_trials, nothing_to_run)

__all__ = ["FollowUp", "Joiner", "settle"]

#: (name of the group that is done, its outcome so far) → the groups that join the run
FollowUp = Callable[[str, RunOutcome], list[GroupSpec]]


def settle(specs: list[GroupSpec], follow_up: FollowUp | None
           ) -> tuple[list[GroupSpec], dict[str, RunOutcome]]:
    """Split ``specs`` into the groups that have trials to run and those done already
    (:func:`~.groups.nothing_to_run`), asking ``follow_up`` at once for each done one and
    settling what it returns in turn.

    Returns:
        (the groups to run, in order; group → RunOutcome of each done group)."""
    queue, live, done = list(specs), [], {}
    while queue:
        spec = queue.pop(0)
        if not nothing_to_run(spec):
            live.append(spec)
            continue
        done[spec.group] = RunOutcome(finished_trials(spec), None)
        if follow_up is not None:
            queue.extend(follow_up(spec.group, done[spec.group]))
    return live, done


class Joiner:
    """Add the follow-up groups of a run's groups as each is done."""

    def __init__(self, driver: Any, book: Any, follow_up: FollowUp,
                 cores: dict[str, Any], built: dict[str, tuple[Any, Any]], max_t: int, *,
                 specs: dict[str, GroupSpec], shipped: set[str]) -> None:
        self.driver, self.book, self.follow_up = driver, book, follow_up
        self.cores, self.built, self.max_t = cores, built, max_t
        self.specs, self.shipped = dict(specs), shipped
        self.joined: list[GroupSpec] = []
        self.settled: dict[str, RunOutcome] = {}

    def watch(self, group: str) -> None:
        """Follow ``group`` up when it is done."""
        self.driver.when_done(group, self._done)

    def outcome(self, group: str) -> RunOutcome:
        """The group's outcome as the book holds it now (trials in start order)."""
        trials = [r for r in self.book.trials.values() if self.book.group_of(r.key) == group]
        return RunOutcome(finished_trials(self.specs[group]) + trials, self.cores[group],
                          self.built[group][1], None, self.driver)

    def _done(self, group: str) -> list[Any]:
        live, settled = settle(self.follow_up(group, self.outcome(group)), self.follow_up)
        self.settled.update(settled)
        groups = []
        for spec in live:
            if spec.resume is not None and spec.resume.points:
                # a stage is released once the stages before it are done, so one with
                # interrupted trials is released before its run starts (:func:`settle`)
                raise SearchError(f"group {spec.group!r} cannot join a running run with "
                                  "interrupted trials to continue")
            if spec.task is not None and spec.task_name not in self.shipped:
                raise SearchError(f"group {spec.group!r} joins with task "
                                  f"{spec.task_name!r}, which the run does not hold; it holds "
                                  f"{sorted(self.shipped)}")
            g, searcher = driver_group(spec, None, self.max_t)
            self.specs[spec.group] = spec
            self.cores[spec.group], self.built[spec.group] = None, (g, searcher)
            self.book.groups[spec.group] = (spec.width, spec.proxy_sweep_id, spec.on_progress)
            if spec.kind is not None:
                self.book.kinds[spec.group] = spec.kind
            self.joined.append(spec)
            groups.append(g)
            self.driver.when_done(spec.group, self._done)   # a follow-up may be followed up
        return groups
