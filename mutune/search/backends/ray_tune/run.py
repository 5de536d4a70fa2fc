"""The Ray Tune backend: one Ray Tune run holds every proxy width of a sweep (or a
confirmation stage's designs, or the one target run).

:func:`run_groups` builds the run's :class:`~mutune.search.driver.SweepDriver` (one group per
width: that width's scheduler core, searcher and trials, so each width's rungs stay apart
while its trials share the slots with every other width's), its
:class:`~.callback.SweepBook`, the two adapters that
translate between Ray and the driver (:class:`~.scheduler_adapter.RayScheduler`,
:class:`~.searcher_adapter.RaySearcher`) and a ``tune.Tuner``, and runs it;
:func:`run_trials` is the one-group case. Trials run
:func:`mutune.search.trial.trainable.train_trial` with one torch thread per granted CPU (on 2
cores, two threads per trial ran 20× slower); actors are reused between trials to cut start-up.
"""
from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mutune.config import RayConfig, SchedulerConfig
from mutune.errors import SearchError
from mutune.search.backends.ray_tune.callback import SweepBook
from mutune.search.backends.ray_tune.cluster import slots, tracking_callbacks
from mutune.search.backends.ray_tune.records import TrialRecord
from mutune.search.backends.ray_tune.retention import checkpoint_bytes_on_disk
from mutune.search.budget import BudgetAdmission
from mutune.search.recording import SweepControl, TrialRecorder
from mutune.search.schedulers.contract import Scheduler
from mutune.search.schedulers.factory import make_scheduler
from mutune.search.trial.remote_trial import remote_settings, remote_store

__all__ = ["run_trials", "run_groups", "GroupSpec", "RunOutcome", "ResumeState", "make_core"]


def make_core(scheduler: SchedulerConfig, *, mode: str, seed: int) -> Scheduler:
    """The scheduler core the config names (kind × variant, :func:`make_scheduler`)."""
    return make_scheduler(scheduler.kind, variant=scheduler.variant,
                          grace_period=scheduler.grace_period,
                          reduction_factor=scheduler.reduction_factor, max_t=scheduler.max_t,
                          mode=mode, seed=seed)


@dataclass
class RunOutcome:
    """The trials of one Ray Tune run, as the driver recorded them, the scheduler core and the
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
    """What an interrupted run leaves to continue (built by the pipeline from the database).

    Attributes:
        points: the unfinished trials' points, each with its ``key`` and ``restore_from``
            (checkpoint folder, or None to start over), in their original order.
        records: key → the unfinished trial's :class:`TrialRecord` (database id, reports).
        finished: the trials that had already ended (kept in the outcome).
        dormant: key → point of the trials paused at a rung (promotion ASHA): issued only
            when the scheduler promotes them, stopped by its ``finish()`` otherwise.
    """
    points: list[dict[str, Any]]
    records: dict[str, TrialRecord]
    finished: list[TrialRecord]
    dormant: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class GroupSpec:
    """One group of a Ray Tune run: the trials of one width (a proxy sweep's, or one
    confirmation design's).

    Attributes:
        width: the trials' model width (each trial's point carries it).
        proxy_sweep_id: the recorder's proxy sweep row (None: the target run).
        group: the driver group's name, prefix of new trial keys (e.g. ``w64``).
        points, searcher, seeds, replicates: the trials, as :func:`run_trials` takes them.
        core: the scheduler core to continue (default: a fresh one from the run's
            ``scheduler`` settings).
        resume: the group's unfinished trials of an interrupted run (:class:`ResumeState`).
        on_progress: (finished, started) of this group's trials after each change.
        diverge_above: step → the limit above which a report diverges
            (:class:`~mutune.search.driver.Group`).
        task: the group's own :class:`~mutune.proxies.task.ProxyTask` (another depth or
            depth parametrization; its points name it), or None: the run's.
    """
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

    def tags(self) -> dict[str, Any]:
        """What each of the group's points carries: its width, and the name of its own task."""
        return {"width": self.width, **({"task": self.group} if self.task is not None else {})}


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


def run_trials(points: list[dict[str, Any]] | None, *, task: Any, width: int, max_t: int,
               recorder: TrialRecorder, sweep_id: int, proxy_sweep_id: int | None, kind: str,
               scheduler: SchedulerConfig | None, metric: str, mode: str, ray_cfg: RayConfig,
               storage: Path, name: str, seq: itertools.count,
               control: SweepControl | None = None,
               on_progress: Callable[[int, int], None] | None = None,
               on_started: Callable[[int], None] | None = None,
               scheduler_seed: int = 0, searcher: Any = None,
               seeds: list[int] | None = None, checkpoint_every: int | str = 0,
               spot: dict[str, Any] | None = None,
               callbacks: list[Any] | None = None, core: Any = None,
               resume: "ResumeState | None" = None, budget: Any = None,
               tracking: Any = None, replicates: int = 1,
               checkpoint_keep: int = 1, group: str | None = None,
               trainable: Callable[..., Any] | None = None,
               diverge_above: dict[int, float] | None = None,
               keep_final: bool = False,
               checkpoint_max_share: float | None = None) -> RunOutcome:
    """Run trials at ``width`` for up to ``max_t`` steps each on Ray Tune (one group:
    :func:`run_groups` with one :class:`GroupSpec`).

    Args:
        points: per trial {"hparams": {...}, "seed": int, "index": int} (run as given; an
            optional ``key`` replaces the default ``{group}-t{i}``), or
            None with ``searcher`` and ``seeds``: the searcher proposes hyperparameters and
            trial i trains with ``seeds[i]`` (with ``replicates`` r > 1: seeds[i·r : (i+1)·r],
            averaged in lockstep).
        core: a scheduler core to continue (restored from saved state); default a fresh one
            from ``scheduler``.
        resume: the unfinished trials of an interrupted run (:class:`ResumeState`): they are
            issued first, keep their keys and database rows, and restore their checkpoints.
        group: the driver group's name, prefix of new trial keys (default ``w{width}``).
        on_progress: called with (trials finished, trials started).
        diverge_above: step → metric value above which a report ends the trial as
            ``diverged`` (:class:`~mutune.search.driver.Group`).
        The other arguments: :func:`run_groups`.
    Returns:
        The group's RunOutcome (:func:`run_groups`).
    Raises:
        SearchError: neither points nor a searcher with seeds.
    """
    spec = GroupSpec(width, proxy_sweep_id, group or f"w{width}", points=points,
                     searcher=searcher, seeds=seeds, replicates=replicates, core=core,
                     resume=resume, on_progress=on_progress, diverge_above=diverge_above)
    return run_groups([spec], task=task, max_t=max_t, recorder=recorder, sweep_id=sweep_id,
                      kind=kind, scheduler=scheduler, metric=metric, mode=mode,
                      ray_cfg=ray_cfg, storage=storage, name=name, seq=seq, control=control,
                      on_started=on_started, scheduler_seed=scheduler_seed,
                      checkpoint_every=checkpoint_every, spot=spot, callbacks=callbacks,
                      budget=budget, tracking=tracking, checkpoint_keep=checkpoint_keep,
                      trainable=trainable, keep_final=keep_final,
                      checkpoint_max_share=checkpoint_max_share)[spec.group]


def _driver_group(spec: GroupSpec, core: Any, max_t: int) -> tuple[Any, Any]:
    """The driver :class:`~mutune.search.driver.Group` of ``spec`` and its searcher.

    Raises:
        SearchError: neither points nor a searcher with seeds.
    """
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


def _nothing_to_run(spec: GroupSpec) -> bool:
    """A resumed design or target that had ended: nothing to start or continue."""
    return (spec.points is not None and not spec.points
            and (spec.resume is None or not spec.resume.points))


def run_groups(specs: list[GroupSpec], *, task: Any, max_t: int, recorder: TrialRecorder,
               sweep_id: int, kind: str, scheduler: SchedulerConfig | None, metric: str,
               mode: str, ray_cfg: RayConfig, storage: Path, name: str,
               seq: itertools.count, control: SweepControl | None = None,
               on_started: Callable[[int], None] | None = None,
               scheduler_seed: int = 0, checkpoint_every: int | str = 0,
               spot: dict[str, Any] | None = None,
               callbacks: list[Any] | None = None, budget: Any = None,
               tracking: Any = None, checkpoint_keep: int = 1,
               trainable: Callable[..., Any] | None = None,
               keep_final: bool = False,
               checkpoint_max_share: float | None = None) -> dict[str, RunOutcome]:
    """Run the trials of every group in ``specs`` — one width each — up to ``max_t`` steps
    each, in **one** Ray Tune run: the groups share the run's slots (``ray.num_cpus`` /
    ``ray.cpus_per_trial`` …), so no width waits for another width's tail, while each keeps
    its own scheduler core (its rungs), searcher and proxy sweep row.

    Order: on a free slot the driver takes promotions first (every group's, highest rung
    first), then interrupted trials, then a new trial from the first group in ``specs``
    order whose searcher has points left (:mod:`mutune.search.driver.loop`); at concurrency 1
    the run is therefore as reproducible as one group's. Callers pass the widest width
    first: its trials are the longest, and the shortest trials then fill the run's tail.

    Args:
        specs: the groups (:class:`GroupSpec`), unique names.
        task: the :class:`~mutune.proxies.task.ProxyTask` (shipped once via the object store).
        recorder: where trial rows go; ``control``: heartbeats and stop requests (default:
            ``recorder`` when it has ``stop_requested``).
        scheduler: ASHA/Hyperband settings (kind, variant, r, η, max_t) of every group, or
            None to run every trial to ``max_t`` (a design, the target run);
            ``scheduler_seed`` seeds Hyperband's bracket assignment.
        storage: folder for Ray Tune's experiment state and the trials' checkpoints.
        checkpoint_every: also checkpoint every this many steps (0: only at rung milestones
            under promotion, and on a preemption notice), or ``"auto"``: Young's interval
            from ``spot`` (``cost.spot`` as a dict, :class:`~mutune.search.trial.cadence.
            Cadence`).
        checkpoint_max_share: with ``checkpoint_every`` steps, hold a periodic checkpoint
            back until its mean seconds are at most this share of the time since the last
            one (the target run's default); None: every interval exactly.
        checkpoint_keep: checkpoints Ray keeps per trial: the best this many by ``metric``,
            plus always the latest; a stopped or diverged trial's are deleted when it ends.
        callbacks: extra Ray Tune callbacks (driver side).
        budget: the sweep's :class:`~mutune.search.budget.BudgetGate` (None: no budget).
        tracking: the config's :class:`~mutune.config.TrackingConfig` (None: no loggers).
        trainable: the Ray function trainable (default: :func:`train_trial` on ``task``).
        keep_final: also checkpoint each trial's trained model at ``max_t`` (the target run:
            its model is kept and exported).
    Returns:
        Group name → its RunOutcome (its trials in a terminal state, its core and searcher;
        the driver is shared); ``stopped`` holds the reason when ``control.stop_requested``
        ended the run early (its unfinished trials ``cancelled``).
    Raises:
        SearchError: a group with neither points nor a searcher with seeds, no group, or
            duplicate group names.
    """
    from ray import tune

    from mutune.search.backends.ray_tune.cancel import CancelStopper
    from mutune.search.backends.ray_tune.scheduler_adapter import RayScheduler
    from mutune.search.backends.ray_tune.searcher_adapter import RaySearcher
    from mutune.search.driver import SweepDriver
    from mutune.search.trial.preemption import PreemptibleTrainable
    from mutune.search.trial.trainable import train_trial

    if not specs:
        raise SearchError("run_groups needs at least one group")

    def finished(spec: GroupSpec) -> list[TrialRecord]:
        return list(spec.resume.finished) if spec.resume else []

    live = [s for s in specs if not _nothing_to_run(s)]
    out = {s.group: RunOutcome(finished(s), None) for s in specs if _nothing_to_run(s)}
    if not live:
        return out
    if control is None and hasattr(recorder, "stop_requested"):
        control = recorder  # type: ignore[assignment]
    cores = {s.group: s.core if s.core is not None or scheduler is None
             else make_core(scheduler, mode=mode, seed=scheduler_seed) for s in live}
    built = {s.group: _driver_group(s, cores[s.group], max_t) for s in live}
    gpus = ray_cfg.gpus_per_trial
    log_dir = str(Path(storage).resolve() / "trial_logs" / name)
    first = live[0]
    book = SweepBook(recorder, control=control, sweep_id=sweep_id,
                     proxy_sweep_id=first.proxy_sweep_id, kind=kind, width=first.width,
                     max_t=max_t, devices=gpus or ray_cfg.cpus_per_trial,
                     device_kind=ray_cfg.priced_kind or "cuda",
                     seq=seq, metric=metric, on_progress=first.on_progress,
                     on_started=on_started, heartbeat_s=ray_cfg.heartbeat_s,
                     resumed={k: r for s in live if s.resume
                              for k, r in s.resume.records.items()},
                     log_dir=log_dir, zombie_timeout_s=ray_cfg.zombie_timeout_s,
                     start_timeout_s=ray_cfg.start_timeout_s)
    book.groups = {s.group: (s.width, s.proxy_sweep_id, s.on_progress) for s in live}
    core0 = next((c for c in cores.values() if c is not None), None)
    admission = (BudgetAdmission(budget, book, core0.grace_period)
                 if budget is not None and core0 is not None else None)
    driver = SweepDriver(
        [built[s.group][0] for s in live], concurrency=slots(ray_cfg), metric=metric,
        admission=admission,
        resume={s.group: [(str(p["key"]), {**p, **s.tags()}) for p in s.resume.points]
                for s in live if s.resume} or None,
        dormant={s.group: {k: {**p, **s.tags()} for k, p in s.resume.dormant.items()}
                 for s in live if s.resume and s.resume.dormant} or None)
    book.driver = driver
    book.remote = remote_store(ray_cfg, name)
    if budget is not None:
        budget.register(book)

    def outcomes(reason: str | None) -> dict[str, RunOutcome]:
        for s in live:
            mine = [r for r in book.trials.values() if book.group_of(r.key) == s.group]
            out[s.group] = RunOutcome(finished(s) + mine, cores[s.group],
                                      built[s.group][1], reason, driver)
        return {s.group: out[s.group] for s in specs}

    stopper = CancelStopper(control, sweep_id)
    if stopper.check() is not None:
        return outcomes(stopper.reason)
    ray_searcher = RaySearcher(driver, book, metric=metric, mode=mode)
    ray_scheduler = RayScheduler(driver, book, metric, mode)
    resources = {"cpu": ray_cfg.cpus_per_trial, **({"gpu": gpus} if gpus else {})}
    # groups with their own task (e.g. one per depth) ship every task once, by group name
    own = {s.group: s.task for s in live if s.task is not None}
    fn = trainable or tune.with_parameters(
        train_trial, task={**{s.group: task for s in live}, **own} if own else task)
    if not hasattr(fn, "__mixins__"):
        # the SIGTERM notice handler, installed in each actor's main thread at set-up
        fn.__mixins__ = (PreemptibleTrainable,)
    threads = max(int(ray_cfg.cpus_per_trial), 1)
    # promotion resumes paused trials from a checkpoint at the rung; the stopping variant
    # checkpoints only every ``checkpoint_every`` steps (and on SIGTERM): a rung checkpoint
    # costs a save plus Ray's copy into its storage at every rung of every trial
    promotion = core0 is not None and core0.variant == "promotion"
    milestones = core0.milestones if promotion else []
    tuner = tune.Tuner(
        tune.with_resources(fn, resources),
        param_space={"width": first.width, "max_t": max_t, "threads": threads, "gpus": gpus,
                     "checkpoint_every": (checkpoint_every if checkpoint_every == "auto"
                                          else int(checkpoint_every)),
                     "spot": dict(spot or {}), "keep_final": keep_final,
                     "checkpoint_max_share": checkpoint_max_share,
                     "checkpoint_at": list(milestones), "log_dir": log_dir,
                     "metric": metric, "preemption": ray_cfg.preemption.model_dump(),
                     "remote": remote_settings(ray_cfg, name, spot)},
        tune_config=tune.TuneConfig(scheduler=ray_scheduler, search_alg=ray_searcher,
                                    num_samples=-1, reuse_actors=True,
                                    metric=metric, mode=mode),
        run_config=tune.RunConfig(name=name, storage_path=str(Path(storage).resolve()),
                                  callbacks=[book, *(callbacks or []),
                                             *tracking_callbacks(tracking, name)],
                                  verbose=0, stop=stopper,
                                  failure_config=tune.FailureConfig(
                                      max_failures=ray_cfg.max_failures),
                                  # the best ``checkpoint_keep`` by the metric, and always
                                  # the latest (Ray's checkpoint manager never drops it)
                                  checkpoint_config=tune.CheckpointConfig(
                                      num_to_keep=checkpoint_keep,
                                      checkpoint_score_attribute=metric,
                                      checkpoint_score_order=mode)),
    )
    tuner.fit()
    if stopper.reason is not None:
        book.close("cancelled", stopper.reason)
    # every trial's output is recorded; what a stopped trial's thread wrote after its last
    # report (already collected) is not kept on disk
    shutil.rmtree(log_dir, ignore_errors=True)
    for rec in book.trials.values():     # retention's outcome: what stays on disk
        rec.timing["checkpoint_bytes_kept"] = float(checkpoint_bytes_on_disk(rec.trial_dir))
    return outcomes(stopper.reason)
