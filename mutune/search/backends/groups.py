"""What one run of a backend is made of: its groups (:class:`GroupSpec`, one width's trials each),
what an interrupted group continues (:class:`ResumeState`), what each group produced
(:class:`RunOutcome`), how a group becomes the driver's (:func:`driver_group`) and its scheduler
core (:func:`make_core`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mutune.config import SchedulerConfig
from mutune.errors import SearchError
from mutune.search.backends.trial_record import TrialRecord
from mutune.search.schedulers.contract import Scheduler
from mutune.search.schedulers.factory import make_scheduler

__all__ = ["RunOutcome", "ResumeState", "GroupSpec", "driver_group", "nothing_to_run",
           "finished_trials", "make_core"]


@dataclass
class RunOutcome:
    """The trials of one run, as the driver recorded them, the scheduler core and the
    searcher (their ``state_dict()`` is what a resume needs)."""
    trials: list[TrialRecord]
    core: Any
    searcher: Any = None
    #: why the run was stopped from outside (``mutune cancel``), None when it ran to its end
    stopped: str | None = None
    #: the run's driver (None for an outcome rebuilt from the database)
    driver: Any = None


@dataclass
class ResumeState:
    """What an interrupted run leaves to continue (built by the pipeline from the database)."""
    points: list[dict[str, Any]]
    records: dict[str, TrialRecord]
    finished: list[TrialRecord]
    dormant: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class GroupSpec:
    """One group of a run: one width's trials (a proxy sweep's, or a confirmation design's)."""
    width: int
    proxy_sweep_id: int | None
    group: str
    points: list[dict[str, Any]] | None = None
    searcher: Any = None
    seeds: list[int] | None = None
    replicates: int = 1
    core: Any = None
    resume: "ResumeState | None" = None
    on_progress: Callable[[int, int], None] | None = None
    diverge_above: dict[int, float] | None = None
    task: Any = None
    kind: str | None = None
    task_key: str | None = None

    @property
    def task_name(self) -> str:
        """The name its own task is shipped under."""
        return self.task_key or self.group

    def tags(self) -> dict[str, Any]:
        """What each of the group's points carries: its width, and the name of its own task."""
        return {"width": self.width,
                **({"task": self.task_name} if self.task is not None else {})}


def _key_of(points: list[dict[str, Any]] | None, group: str, i: int) -> str:
    """Trial i's key: the point's own ``key`` when the caller gave one (a resumed design
    keeps the keys of its recorded trials), else ``{group}-t{i}``."""
    if points is not None and i < len(points) and points[i].get("key"):
        return str(points[i]["key"])
    return f"{group}-t{i}"


def _make_point(points: list[dict[str, Any]] | None, seeds: list[int] | None,
                replicates: int, tags: dict[str, Any]) -> Callable[[int, dict], dict]:
    if points is not None:
        given = [{**p, **tags} for p in points]
        return lambda i, hp: dict(given[i])
    r = max(replicates, 1)
    if seeds is None or len(seeds) % r:
        raise SearchError(f"{0 if seeds is None else len(seeds)} seeds for {r} replicates "
                          "per trial")

    def make_point(i: int, hp: dict) -> dict:
        # ``replicates`` seeds per trial: trial i trains seeds[i·r : (i+1)·r] in lockstep
        own = [int(x) for x in seeds[i * r:(i + 1) * r]]
        return {"hparams": hp, "seed": own[0], "index": i, **tags,
                **({"replicate_seeds": own} if r > 1 else {})}
    return make_point


def driver_group(spec: GroupSpec, core: Any, max_t: int) -> tuple[Any, Any]:
    """The driver :class:`~mutune.search.driver.Group` of ``spec`` and its searcher.

    Raises:
        SearchError: neither points nor a searcher with seeds."""
    from mutune.search.driver import Group
    from mutune.search.searchers.simple import FixedSearcher

    points, resume, searcher = spec.points, spec.resume, spec.searcher
    if points is not None and not points and resume is not None and resume.points:
        # only continued trials (a resumed target): a searcher with nothing left to propose
        searcher = FixedSearcher([p["hparams"] for p in resume.points])
        for p in resume.points:
            searcher.suggest(str(p["key"]))
    elif points is not None:
        searcher = FixedSearcher([p["hparams"] for p in points])
    elif searcher is None or spec.seeds is None:
        raise SearchError(f"group {spec.group}: a run needs points, or a searcher and seeds")
    make_point = _make_point(points, spec.seeds, spec.replicates, spec.tags())
    return Group(spec.group, searcher, core, max_t, make_point=make_point,
                 key_of=lambda i: _key_of(points, spec.group, i),
                 diverge_above=spec.diverge_above), searcher


def nothing_to_run(spec: GroupSpec) -> bool:
    """A resumed design or target that had ended: nothing to start or continue."""
    return (spec.points is not None and not spec.points
            and (spec.resume is None or not spec.resume.points))


def finished_trials(spec: GroupSpec) -> list[TrialRecord]:
    """The trials of ``spec`` a resumed sweep had ended (kept in its outcome)."""
    return list(spec.resume.finished) if spec.resume else []


def make_core(scheduler: SchedulerConfig, *, mode: str, seed: int) -> Scheduler:
    """The scheduler core the config names (kind × variant, :func:`make_scheduler`)."""
    return make_scheduler(scheduler.kind, variant=scheduler.variant,
                          grace_period=scheduler.grace_period,
                          reduction_factor=scheduler.reduction_factor, max_t=scheduler.max_t,
                          mode=mode, seed=seed)
