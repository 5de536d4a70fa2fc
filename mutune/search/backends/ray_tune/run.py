"""The Ray Tune backend: one Ray Tune run holds every proxy width of a sweep (or a
confirmation stage's designs, or the one target run)."""
from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mutune.errors import SearchError
from mutune.search.backends.base import RunSettings
from mutune.search.backends.groups import (GroupSpec, RunOutcome, driver_group,
                                           finished_trials, make_core)
from mutune.search.backends.ray_tune.callback import BookSpec, SweepBook
from mutune.search.backends.ray_tune.cluster import (local_worker_env, pending_trials, slots,
                                                      tracking_callbacks)
from mutune.search.backends.ray_tune.retention import checkpoint_bytes_on_disk
from mutune.search.budget import BudgetAdmission
from mutune.search.trial.remote import safe_name
from mutune.search.trial.remote_trial import remote_settings, remote_store

__all__ = ["run_groups"]


def trial_name(trial: Any) -> str:
    """A Ray trial's name and folder under its run: the driver's key and Ray's trial id
    (``w16-t0_d6029d46``; a retried key gets a new id), where Ray's default appends the
    flattened config, here the run's settings cut off mid-way."""
    key = str((trial.config.get("point") or {}).get("key", "trial"))
    return f"{safe_name(key)}_{trial.trial_id}"


def run_groups(specs: list[GroupSpec], settings: RunSettings,
               follow_up: Any = None) -> dict[str, RunOutcome]:
    """Run the trials of every group in ``specs`` — one width each — up to ``settings.max_t`` steps
    each, in **one** Ray Tune run: the groups share the run's slots (``ray.num_cpus`` /
    ``ray.cpus_per_trial`` …), so no width waits for another width's tail, while each keeps its
    own scheduler core (its rungs), searcher and proxy sweep row.

    Raises:
        SearchError: a group with neither points nor a searcher with seeds, no group, or
            duplicate group names."""
    from mutune.search.backends.ray_tune.cancel import CancelStopper
    from mutune.search.backends.joining import settle

    if not specs:
        raise SearchError("run_groups needs at least one group")
    # a resumed design that had ended is done already: what follows it is asked at once
    live, out = settle(specs, follow_up)
    if not live:
        return out
    run = _assemble(live, settings, follow_up)
    stopper = CancelStopper(settings.controller, settings.sweep_id)
    if stopper.check() is None:
        tuner = _tuner(run, settings, stopper)
        with pending_trials(run.driver.concurrency):    # every slot's actor starts at once
            tuner.fit()
        if stopper.reason is not None:
            run.book.close("cancelled", stopper.reason)
        _tidy(run)
    return run.outcomes(out, stopper.reason)


@dataclass
class _Run:
    """One Ray Tune run's driver side: its groups, cores, driver, book and joiner."""
    live: list[GroupSpec]
    cores: dict[str, Any]
    built: dict[str, tuple[Any, Any]]
    book: SweepBook
    driver: Any
    log_dir: str
    shipped: dict[str, Any] = field(default_factory=dict)
    joiner: Any = None

    def outcomes(self, out: dict[str, RunOutcome], reason: str | None
                 ) -> dict[str, RunOutcome]:
        """Each group's RunOutcome (the joined groups' too), added to ``out``."""
        joined = self.joiner.joined if self.joiner is not None else []
        for s in [*self.live, *joined]:
            mine = [r for r in self.book.trials.values()
                    if self.book.group_of(r.key) == s.group]
            out[s.group] = RunOutcome(finished_trials(s) + mine, self.cores[s.group],
                                      self.built[s.group][1], reason, self.driver)
        if self.joiner is not None:
            out.update(self.joiner.settled)
        return out


def _assemble(live: list[GroupSpec], settings: RunSettings, follow_up: Any) -> _Run:
    """The run's cores, driver groups, book, driver and joiner (nothing started yet)."""
    from mutune.search.driver import SweepDriver

    s0, sched = settings, settings.scheduler
    cores = {s.group: s.core if s.core is not None or sched is None
             or s.kind not in (None, s0.kind)       # a design in the proxies' run: to max_t
             else make_core(sched, mode=s0.mode, seed=s0.scheduler_seed) for s in live}
    built = {s.group: driver_group(s, cores[s.group], s0.max_t) for s in live}
    log_dir = str(Path(s0.storage).resolve() / "trial_logs" / s0.name)
    book = _book(live, settings, log_dir)
    core0 = next((c for c in cores.values() if c is not None), None)
    admission = (BudgetAdmission(s0.budget, book, core0.grace_period)
                 if s0.budget is not None and core0 is not None else None)
    driver = SweepDriver(
        [built[s.group][0] for s in live], concurrency=slots(s0.ray_cfg), metric=s0.metric,
        admission=admission,
        resume={s.group: [(str(p["key"]), {**p, **s.tags()}) for p in s.resume.points]
                for s in live if s.resume} or None,
        dormant={s.group: {k: {**p, **s.tags()} for k, p in s.resume.dormant.items()}
                 for s in live if s.resume and s.resume.dormant} or None)
    book.driver = driver
    # groups with their own task (e.g. one per depth) ship every task once, by its name
    task = s0.task
    shipped = dict(task) if isinstance(task, Mapping) else {}
    shipped.update({s.task_name: s.task for s in live if s.task is not None})
    run = _Run(live, cores, built, book, driver, log_dir, shipped)
    if follow_up is not None:
        from mutune.search.backends.joining import Joiner

        run.joiner = Joiner(driver, book, follow_up, cores, built, s0.max_t,
                            specs={s.group: s for s in live}, shipped=set(shipped))
        for s in live:
            run.joiner.watch(s.group)
    book.remote = remote_store(s0.ray_cfg, s0.name)
    if s0.budget is not None:
        s0.budget.register(book)
    return run


def _book(live: list[GroupSpec], settings: RunSettings, log_dir: str) -> SweepBook:
    """The run's :class:`~.callback.SweepBook`, holding every group."""
    ray_cfg, first = settings.ray_cfg, live[0]
    spec = BookSpec(sweep_id=settings.sweep_id, proxy_sweep_id=first.proxy_sweep_id,
                    kind=settings.kind, width=first.width, max_t=settings.max_t,
                    devices=ray_cfg.gpus_per_trial or ray_cfg.cpus_per_trial,
                    device_kind=ray_cfg.priced_kind or "cuda", metric=settings.metric,
                    heartbeat_s=ray_cfg.heartbeat_s, log_dir=log_dir)
    book = SweepBook(settings.recorder, spec, seq=settings.seq, control=settings.controller,
                     on_progress=first.on_progress, on_started=settings.on_started,
                     resumed={k: r for s in live if s.resume
                              for k, r in s.resume.records.items()})
    book.groups = {s.group: (s.width, s.proxy_sweep_id, s.on_progress) for s in live}
    book.kinds = {s.group: s.kind for s in live if s.kind is not None}
    return book


def _param_space(run: _Run, settings: RunSettings, hold_s: float) -> dict[str, Any]:
    """What every trial's config carries besides its point (the trial's settings)."""
    ray_cfg, ck = settings.ray_cfg, settings.checkpoints
    core0 = next((c for c in run.cores.values() if c is not None), None)
    # promotion resumes paused trials from a checkpoint at the rung; the stopping variant
    # checkpoints only every ``checkpoint_every`` steps (and on SIGTERM): a rung checkpoint
    # costs a save plus Ray's copy into its storage at every rung of every trial
    promotion = core0 is not None and core0.variant == "promotion"
    return {"width": run.live[0].width, "max_t": settings.max_t,
            "threads": max(int(ray_cfg.cpus_per_trial), 1), "gpus": ray_cfg.gpus_per_trial,
            "checkpoint_every": ck.every if ck.every == "auto" else int(ck.every),
            "spot": dict(ck.spot), "keep_final": ck.keep_final,
            "checkpoint_max_share": ck.max_share,
            "checkpoint_at": list(core0.milestones) if promotion else [],
            "log_dir": run.log_dir, "metric": settings.metric,
            "preemption": ray_cfg.preemption.model_dump(),
            "remote": remote_settings(ray_cfg, settings.name, ck.spot or None),
            "report_hold_s": hold_s}


def _tuner(run: _Run, settings: RunSettings, stopper: Any) -> Any:
    """The ``tune.Tuner`` of the run: the driver's adapters, the book, the trainable."""
    from ray import tune

    from mutune.search.backends.ray_tune.scheduler_adapter import RayScheduler
    from mutune.search.backends.ray_tune.searcher_adapter import RaySearcher
    from mutune.search.trial.preemption import PreemptibleTrainable
    from mutune.search.trial.trainable import train_trial

    ray_cfg, metric, mode = settings.ray_cfg, settings.metric, settings.mode
    gpus = ray_cfg.gpus_per_trial
    resources = {"cpu": ray_cfg.cpus_per_trial, **({"gpu": gpus} if gpus else {})}
    fn = settings.trainable or tune.with_parameters(train_trial,
                                                    task=run.shipped or settings.task)
    if not hasattr(fn, "__mixins__"):
        # the SIGTERM notice handler, installed in each actor's main thread at set-up
        fn.__mixins__ = (PreemptibleTrainable,)
    loggers = tracking_callbacks(settings.tracking, settings.name)
    # Tune's loggers log the reports Ray delivers: with them every report goes at once
    hold_s = 0.0 if loggers else ray_cfg.report_hold_window()
    storage = str(Path(settings.storage).resolve())
    return tune.Tuner(
        tune.with_resources(fn, resources),
        param_space=_param_space(run, settings, hold_s),
        tune_config=tune.TuneConfig(
            scheduler=RayScheduler(run.driver, run.book, metric, mode,
                                   worker_env=local_worker_env()),
            search_alg=RaySearcher(run.driver, run.book, metric=metric, mode=mode),
            num_samples=-1, reuse_actors=True, metric=metric, mode=mode,
            trial_name_creator=trial_name, trial_dirname_creator=trial_name),
        run_config=tune.RunConfig(
            name=settings.name, storage_path=storage,
            callbacks=[run.book, _control(run.book, ray_cfg), *settings.callbacks, *loggers],
            verbose=0, stop=stopper,
            failure_config=tune.FailureConfig(max_failures=ray_cfg.max_failures),
            # the best ``checkpoints.keep`` by the metric, and always the latest (Ray's
            # checkpoint manager never drops it)
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=settings.checkpoints.keep, checkpoint_score_attribute=metric,
                checkpoint_score_order=mode)))


def _control(book: SweepBook, ray_cfg: Any) -> Any:
    """The run's :class:`~.control.RunControl`, after the book in Ray's callback order."""
    from mutune.search.backends.ray_tune.control import RunControl
    from mutune.search.backends.ray_tune.zombies import ZombieReaper

    timeouts = ray_cfg.zombie_timeout_s, ray_cfg.start_timeout_s
    reaper = (ZombieReaper(timeouts[0], devices=book.devices, device_kind=book.device_kind,
                           start_timeout_s=timeouts[1])
              if timeouts != (None, None) else None)
    return RunControl(book, reaper)


def _tidy(run: _Run) -> None:
    """After the run: the trials' log folder removed (every output is recorded), and what
    each trial's retention left on disk noted in its timing."""
    shutil.rmtree(run.log_dir, ignore_errors=True)
    for rec in run.book.trials.values():
        rec.timing["checkpoint_bytes_kept"] = float(checkpoint_bytes_on_disk(rec.trial_dir))
