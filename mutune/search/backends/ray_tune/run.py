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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mutune.config import RayConfig, SchedulerConfig
from mutune.errors import SearchError
from mutune.search.backends.ray_tune.callback import SweepBook
from mutune.search.backends.ray_tune.cluster import (local_worker_env, pending_trials, slots,
                                                      tracking_callbacks)
from mutune.search.backends.ray_tune.groups import (GroupSpec, ResumeState, RunOutcome,
                                                    driver_group, finished_trials)
from mutune.search.backends.ray_tune.retention import checkpoint_bytes_on_disk
from mutune.search.budget import BudgetAdmission
from mutune.search.recording import SweepControl, TrialRecorder
from mutune.search.schedulers.contract import Scheduler
from mutune.search.schedulers.factory import make_scheduler
from mutune.search.trial.remote import safe_name
from mutune.search.trial.remote_trial import remote_settings, remote_store

__all__ = ["run_trials", "run_groups", "GroupSpec", "RunOutcome", "ResumeState", "make_core"]


def trial_name(trial: Any) -> str:
    """A Ray trial's name and folder under its run: the driver's key and Ray's trial id
    (``w16-t0_d6029d46``; a retried key gets a new id), where Ray's default appends the
    flattened config, here the run's settings cut off mid-way."""
    key = str((trial.config.get("point") or {}).get("key", "trial"))
    return f"{safe_name(key)}_{trial.trial_id}"


def make_core(scheduler: SchedulerConfig, *, mode: str, seed: int) -> Scheduler:
    """The scheduler core the config names (kind × variant, :func:`make_scheduler`)."""
    return make_scheduler(scheduler.kind, variant=scheduler.variant,
                          grace_period=scheduler.grace_period,
                          reduction_factor=scheduler.reduction_factor, max_t=scheduler.max_t,
                          mode=mode, seed=seed)


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
               checkpoint_max_share: float | None = None,
               follow_up: Any = None) -> dict[str, RunOutcome]:
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
        budget: the sweep's :class:`~mutune.search.budget.SweepBudget` (None: no budget).
        tracking: the config's :class:`~mutune.config.TrackingConfig` (None: no loggers).
        trainable: the Ray function trainable (default: :func:`train_trial` on ``task``).
        keep_final: also checkpoint each trial's trained model at ``max_t`` (the target run:
            its model is kept and exported).
        follow_up: (group, its outcome) → groups that join the run once that group is done
            (:data:`~.joining.FollowUp`; a width's confirmation design), or None. Not with
            groups that carry their own task.
    Returns:
        Group name → its RunOutcome (its trials in a terminal state, its core and searcher;
        the driver is shared) — the joined groups' too; ``stopped`` holds the reason when
        ``control.stop_requested`` ended the run early (its unfinished trials ``cancelled``).
    Raises:
        SearchError: a group with neither points nor a searcher with seeds, no group,
            duplicate group names, or ``follow_up`` with groups of their own task.
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
    from mutune.search.backends.ray_tune.joining import settle

    # a resumed design that had ended is done already: what follows it is asked at once
    live, out = settle(specs, follow_up)
    if not live:
        return out
    if control is None and hasattr(recorder, "stop_requested"):
        control = recorder  # type: ignore[assignment]
    cores = {s.group: s.core if s.core is not None or scheduler is None
             or s.kind not in (None, kind)       # a design in the proxies' run: to max_t
             else make_core(scheduler, mode=mode, seed=scheduler_seed) for s in live}
    built = {s.group: driver_group(s, cores[s.group], max_t) for s in live}
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
    book.kinds = {s.group: s.kind for s in live if s.kind is not None}
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
    # groups with their own task (e.g. one per depth) ship every task once, by its name
    shipped = dict(task) if isinstance(task, Mapping) else {}
    shipped.update({s.task_name: s.task for s in live if s.task is not None})
    joiner = None
    if follow_up is not None:
        from mutune.search.backends.ray_tune.joining import Joiner

        joiner = Joiner(driver, book, follow_up, cores, built, max_t,
                        specs={s.group: s for s in live}, shipped=set(shipped))
        for s in live:
            joiner.watch(s.group)
    book.remote = remote_store(ray_cfg, name)
    if budget is not None:
        budget.register(book)

    def outcomes(reason: str | None) -> dict[str, RunOutcome]:
        joined = joiner.joined if joiner is not None else []
        for s in [*live, *joined]:
            mine = [r for r in book.trials.values() if book.group_of(r.key) == s.group]
            out[s.group] = RunOutcome(finished_trials(s) + mine, cores[s.group],
                                      built[s.group][1], reason, driver)
        if joiner is not None:
            out.update(joiner.settled)
        return out

    stopper = CancelStopper(control, sweep_id)
    if stopper.check() is not None:
        return outcomes(stopper.reason)
    ray_searcher = RaySearcher(driver, book, metric=metric, mode=mode)
    ray_scheduler = RayScheduler(driver, book, metric, mode, worker_env=local_worker_env())
    resources = {"cpu": ray_cfg.cpus_per_trial, **({"gpu": gpus} if gpus else {})}
    fn = trainable or tune.with_parameters(train_trial, task=shipped or task)
    if not hasattr(fn, "__mixins__"):
        # the SIGTERM notice handler, installed in each actor's main thread at set-up
        fn.__mixins__ = (PreemptibleTrainable,)
    threads = max(int(ray_cfg.cpus_per_trial), 1)
    loggers = tracking_callbacks(tracking, name)
    # Tune's loggers log the reports Ray delivers: with them every report goes at once
    hold_s = 0.0 if loggers else ray_cfg.report_hold_window()
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
                     "remote": remote_settings(ray_cfg, name, spot),
                     "report_hold_s": hold_s},
        tune_config=tune.TuneConfig(scheduler=ray_scheduler, search_alg=ray_searcher,
                                    num_samples=-1, reuse_actors=True,
                                    metric=metric, mode=mode, trial_name_creator=trial_name,
                                    trial_dirname_creator=trial_name),
        run_config=tune.RunConfig(name=name, storage_path=str(Path(storage).resolve()),
                                  callbacks=[book, *(callbacks or []), *loggers],
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
    with pending_trials(driver.concurrency):    # every slot's actor starts at once
        tuner.fit()
    if stopper.reason is not None:
        book.close("cancelled", stopper.reason)
    # every trial's output is recorded; what a stopped trial's thread wrote after its last
    # report (already collected) is not kept on disk
    shutil.rmtree(log_dir, ignore_errors=True)
    for rec in book.trials.values():     # retention's outcome: what stays on disk
        rec.timing["checkpoint_bytes_kept"] = float(checkpoint_bytes_on_disk(rec.trial_dir))
    return outcomes(stopper.reason)
