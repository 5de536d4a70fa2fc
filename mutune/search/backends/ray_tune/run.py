"""Ray Tune set-up: one ASHA sweep per proxy width, and the one target run.

Ray runs as a real cluster: a local one started with an explicit ``num_cpus`` and no dashboard
(:func:`ray_cluster`), or an existing one at ``ray.address``. Trials run
:func:`mutune.search.trial.trainable.train_trial` with one torch thread per granted CPU (on 2 cores, two
threads per trial ran 20× slower) and actors are reused between trials to cut start-up cost.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mutune.config import RayConfig, SchedulerConfig
from mutune.recording import Recorder
from mutune.errors import SearchError
from mutune.search.backends.ray_tune.callback import SweepBook, TrialRecord, checkpoint_bytes_on_disk
from mutune.search.schedulers.factory import make_scheduler

__all__ = ["ray_cluster", "run_trials", "RunOutcome", "make_core", "slots",
           "tracking_callbacks", "ResumeState"]


def tracking_callbacks(tracking: Any, name: str) -> list[Any]:
    """Ray Tune's own logger callbacks the config's ``tracking`` section asks for:
    ``TBXLoggerCallback`` (TensorBoard) and ``MLflowLoggerCallback`` (experiment
    ``mlflow_experiment`` or ``name``).

    Raises:
        SearchError: a logger is asked for but its package (extra) is not installed.
    """
    import importlib.util

    from mutune.errors import SearchError

    out: list[Any] = []
    if tracking is None:
        return out
    if tracking.tensorboard:
        if importlib.util.find_spec("tensorboardX") is None:
            raise SearchError("tracking.tensorboard needs tensorboardX: pip install "
                              "'mutune[tensorboard]'")
        from ray.tune.logger import TBXLoggerCallback
        out.append(TBXLoggerCallback())
    if tracking.mlflow_uri:
        if importlib.util.find_spec("mlflow") is None:
            raise SearchError("tracking.mlflow_uri needs mlflow: pip install 'mutune[mlflow]'")
        from ray.air.integrations.mlflow import MLflowLoggerCallback
        out.append(MLflowLoggerCallback(tracking_uri=tracking.mlflow_uri,
                                        experiment_name=tracking.mlflow_experiment or name))
    return out


@contextlib.contextmanager
def ray_cluster(cfg: RayConfig) -> Iterator[None]:
    """Connect to Ray for the duration of the block, starting a local cluster if needed.

    A cluster already initialized in this process is used as it is and left running; one
    started here (``num_cpus`` CPUs, dashboard off, worker logs not forwarded) is shut down
    on exit. ``cfg.address`` connects to an existing cluster instead.
    """
    import ray

    # Tune's per-trial CSV/JSON/TensorBoard loggers cost start-up time per trial; mutune
    # records everything in its own database.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no experiment banners; verbose=0
    if ray.is_initialized():
        yield
        return
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                  logging_level=logging.ERROR, configure_logging=True)
    if cfg.address:
        ray.init(address=cfg.address, **kwargs)
    else:
        # address="local": always a new local cluster, never one another process started
        # on this machine (ray.init() without an address joins the latest `ray start` one)
        ray.init(address="local", num_cpus=cfg.num_cpus, **kwargs)
    try:
        yield
    finally:
        ray.shutdown()


def make_core(scheduler: SchedulerConfig, *, mode: str, seed: int) -> Any:
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


def slots(ray_cfg: RayConfig) -> int:
    """Trials that can run at once: ``max_concurrent_trials`` if set, else what the connected
    cluster's CPUs (and GPUs, when trials take some) allow for the per-trial resources."""
    if ray_cfg.max_concurrent_trials:
        return ray_cfg.max_concurrent_trials
    import ray

    res = ray.cluster_resources()
    n = int(res.get("CPU", ray_cfg.num_cpus) // ray_cfg.cpus_per_trial)
    if ray_cfg.gpus_per_trial:
        n = min(n, int(res.get("GPU", 0) // ray_cfg.gpus_per_trial))
    return max(n, 1)


def run_trials(points: list[dict[str, Any]] | None, *, task: Any, width: int, max_t: int,
               recorder: Recorder, sweep_id: int, proxy_sweep_id: int | None, kind: str,
               scheduler: SchedulerConfig | None, metric: str, mode: str, ray_cfg: RayConfig,
               storage: Path, name: str, seq: itertools.count,
               on_progress: Callable[[int, int], None] | None = None,
               on_started: Callable[[int], None] | None = None,
               scheduler_seed: int = 0, searcher: Any = None,
               seeds: list[int] | None = None, checkpoint_every: int = 0,
               callbacks: list[Any] | None = None, core: Any = None,
               resume: "ResumeState | None" = None, budget: Any = None,
               tracking: Any = None, replicates: int = 1,
               checkpoint_keep: int = 1) -> RunOutcome:
    """Run trials at ``width`` for up to ``max_t`` steps each on Ray Tune.

    Args:
        points: per trial {"hparams": {...}, "seed": int, "index": int} (run as given), or
            None with ``searcher`` and ``seeds``: the searcher proposes hyperparameters
            (:mod:`mutune.search.searchers`) and trial i trains with ``seeds[i]`` (with
            ``replicates`` r > 1: seeds[i·r : (i+1)·r], averaged in lockstep).
        task: the :class:`~mutune.proxies.task.ProxyTask` (shipped once via the object store).
        scheduler: ASHA/Hyperband settings (kind, variant, r, η, max_t), or None to run every
            trial to ``max_t`` (the target run); ``scheduler_seed`` seeds Hyperband's
            bracket assignment.
        storage: folder for Ray Tune's experiment state and the trials' checkpoints.
        checkpoint_every: also checkpoint every this many steps (0: only at rung milestones).
        checkpoint_keep: checkpoints Ray keeps per trial: the best this many by ``metric``,
            plus always the latest; a stopped or diverged trial's are deleted when it ends.
        callbacks: extra Ray Tune callbacks (driver side).
        core: a scheduler core to continue (restored from saved state); default a fresh one
            from ``scheduler``.
        resume: the unfinished trials of an interrupted run (:class:`ResumeState`): they are
            issued first, keep their keys and database rows, and restore their checkpoints.
        on_progress: called with (finished, started) trial counts.
        on_started: called with each trial's recorder id right after it is recorded.
        budget: the sweep's :class:`~mutune.search.budget.BudgetGate` (None: no budget);
            with a scheduler it admits each new trial (see :class:`RayASHA`).
        tracking: the config's :class:`~mutune.config.TrackingConfig` (None: no loggers).
    Returns:
        RunOutcome with every trial in a terminal state; ``stopped`` holds the reason when
        ``recorder.stop_requested`` ended the run early (its unfinished trials ``cancelled``).
    Raises:
        SearchError: neither points nor a searcher with seeds.
    """
    from ray import tune

    from mutune.search.backends.ray_tune.scheduler_adapter import RayASHA
    from mutune.search.backends.ray_tune.searcher_adapter import RaySearcher
    from mutune.search.searchers import FixedSearcher
    from mutune.search.backends.ray_tune.cancel import SweepStopper
    from mutune.search.trial.trainable import train_trial

    if points is not None:
        searcher = FixedSearcher([p["hparams"] for p in points])
        given = [dict(p) for p in points]

        def make_point(i: int, hp: dict) -> dict:
            return given[i]
    elif searcher is not None and seeds is not None:
        r = max(replicates, 1)
        if len(seeds) % r:
            raise SearchError(f"{len(seeds)} seeds for {r} replicates per trial")

        def make_point(i: int, hp: dict) -> dict:
            # ``replicates`` seeds per trial: trial i trains seeds[i·r : (i+1)·r] in lockstep
            own = [int(x) for x in seeds[i * r:(i + 1) * r]]
            return {"hparams": hp, "seed": own[0], "index": i,
                    **({"replicate_seeds": own} if r > 1 else {})}
    else:
        raise SearchError("run_trials needs points, or a searcher and seeds")
    if core is None and scheduler is not None:
        core = make_core(scheduler, mode=mode, seed=scheduler_seed)
    gpus = ray_cfg.gpus_per_trial
    log_dir = str(Path(storage).resolve() / "trial_logs" / name)
    book = SweepBook(recorder, sweep_id=sweep_id, proxy_sweep_id=proxy_sweep_id, kind=kind,
                     width=width, max_t=max_t, devices=gpus or ray_cfg.cpus_per_trial,
                     device_kind=ray_cfg.device_kind, seq=seq, core=core,
                     on_progress=on_progress, on_started=on_started, searcher=searcher,
                     heartbeat_s=ray_cfg.heartbeat_s,
                     resumed=resume.records if resume else None, log_dir=log_dir,
                     zombie_timeout_s=ray_cfg.zombie_timeout_s)
    if budget is not None:
        budget.register(book)
    stopper = SweepStopper(recorder, sweep_id)
    if stopper.check() is not None:
        return RunOutcome(list(resume.finished) if resume else [], core, searcher,
                          stopper.reason)
    ray_searcher = RaySearcher(searcher, make_point, core=core, metric=metric, mode=mode,
                               concurrency=slots(ray_cfg), max_t=max_t,
                               resume=resume.points if resume else None,
                               dormant=resume.dormant if resume else None, book=book,
                               gate=budget)
    ray_scheduler = RayASHA(core, book, metric, ray_searcher, budget) if core else None
    resources = {"cpu": ray_cfg.cpus_per_trial, **({"gpu": gpus} if gpus else {})}
    trainable = tune.with_resources(tune.with_parameters(train_trial, task=task), resources)
    threads = max(int(ray_cfg.cpus_per_trial), 1)
    # promotion resumes paused trials from a checkpoint at the rung; the stopping variant
    # checkpoints only every ``checkpoint_every`` steps (and on SIGTERM): a rung checkpoint
    # costs a save plus Ray's copy into its storage at every rung of every trial
    promotion = core is not None and getattr(core, "variant", "stopping") == "promotion"
    milestones = core.milestones if promotion else []
    tuner = tune.Tuner(
        trainable,
        param_space={"width": width, "max_t": max_t, "threads": threads, "gpus": gpus,
                     "checkpoint_every": int(checkpoint_every),
                     "checkpoint_at": list(milestones), "log_dir": log_dir},
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
    done = list(resume.finished) if resume else []
    return RunOutcome(done + list(book.trials.values()), core, searcher, stopper.reason)


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
