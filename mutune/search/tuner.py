"""Ray Tune set-up: one ASHA sweep per proxy width, and the one target run.

Ray runs as a real cluster: a local one started with an explicit ``num_cpus`` and no dashboard
(:func:`ray_cluster`), or an existing one at ``ray.address``. Trials run
:func:`mutune.search.trainable.train_trial` with one torch thread per granted CPU (on 2 cores, two
threads per trial ran 20× slower) and actors are reused between trials to cut start-up cost.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutune.config import RayConfig, SchedulerConfig
from mutune.recorder import Recorder
from mutune.search.asha import ASHA
from mutune.search.book import SweepBook, TrialRecord
from mutune.search.hyperband import Hyperband

__all__ = ["ray_cluster", "run_trials", "RunOutcome", "make_core", "tracking_callbacks"]


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


def make_core(scheduler: SchedulerConfig, *, mode: str, seed: int) -> ASHA | Hyperband:
    """The scheduler core the config names: :class:`ASHA` or :class:`Hyperband`."""
    kw = dict(grace_period=scheduler.grace_period, reduction_factor=scheduler.reduction_factor,
              max_t=scheduler.max_t, mode=mode)
    return Hyperband(**kw, seed=seed) if scheduler.kind == "hyperband" else ASHA(**kw)


@dataclass
class RunOutcome:
    """The trials of one Ray Tune run, as the driver recorded them, and the scheduler core."""
    trials: list[TrialRecord]
    core: ASHA | Hyperband | None
    #: why the run was stopped from outside (``mutune cancel``), None when it ran to its end
    stopped: str | None = None


def run_trials(points: list[dict[str, Any]], *, task: Any, width: int, max_t: int,
               recorder: Recorder, sweep_id: int, proxy_sweep_id: int | None, kind: str,
               scheduler: SchedulerConfig | None, metric: str, mode: str, ray_cfg: RayConfig,
               storage: Path, name: str, seq: itertools.count,
               on_progress: Callable[[int, int], None] | None = None,
               on_started: Callable[[int], None] | None = None,
               scheduler_seed: int = 0, budget: Any = None,
               tracking: Any = None) -> RunOutcome:
    """Run ``points`` as Ray Tune trials at ``width`` for up to ``max_t`` steps each.

    Args:
        points: per trial {"hparams": {...}, "seed": int, "index": int}.
        task: the :class:`~mutune.proxies.task.ProxyTask` (shipped once via the object store).
        scheduler: ASHA/Hyperband settings, or None to run every trial to ``max_t`` (the
            target run); ``scheduler_seed`` seeds Hyperband's bracket assignment.
        storage: folder for Ray Tune's experiment state (absolute path is taken).
        on_progress: called with (finished, started) trial counts.
        on_started: called with each trial's recorder id right after it is recorded.
        budget: the sweep's :class:`~mutune.search.budget.BudgetGate` (None: no budget);
            with a scheduler it admits each new trial (see :class:`RayASHA`).
        tracking: the config's :class:`~mutune.config.TrackingConfig` (None: no loggers).
    Returns:
        RunOutcome with every trial in a terminal state; ``stopped`` holds the reason when
        ``recorder.stop_requested`` ended the run early (its unfinished trials ``cancelled``).
    """
    from ray import tune

    from mutune.search.ray_adapter import RayASHA
    from mutune.search.stopping import SweepStopper
    from mutune.search.trainable import train_trial

    core = make_core(scheduler, mode=mode, seed=scheduler_seed) if scheduler else None
    gpus = ray_cfg.gpus_per_trial
    log_dir = str(Path(storage).resolve() / "trial_logs" / name)
    book = SweepBook(recorder, sweep_id=sweep_id, proxy_sweep_id=proxy_sweep_id, kind=kind,
                     width=width, max_t=max_t, devices=gpus or ray_cfg.cpus_per_trial,
                     device_kind=ray_cfg.device_kind, seq=seq, core=core,
                     on_progress=on_progress, on_started=on_started, log_dir=log_dir)
    if budget is not None:
        budget.register(book)
    stopper = SweepStopper(recorder, sweep_id)
    if stopper.check() is not None:
        return RunOutcome([], core, stopper.reason)
    ray_scheduler = RayASHA(core, book, metric, budget) if core else None
    resources = {"cpu": ray_cfg.cpus_per_trial, **({"gpu": gpus} if gpus else {})}
    trainable = tune.with_resources(tune.with_parameters(train_trial, task=task), resources)
    threads = max(int(ray_cfg.cpus_per_trial), 1)
    tuner = tune.Tuner(
        trainable,
        param_space={"point": tune.grid_search(points), "width": width, "max_t": max_t,
                     "threads": threads, "gpus": gpus, "log_dir": log_dir},
        tune_config=tune.TuneConfig(scheduler=ray_scheduler, num_samples=1,
                                    reuse_actors=True,
                                    max_concurrent_trials=ray_cfg.max_concurrent_trials),
        run_config=tune.RunConfig(name=name, storage_path=str(Path(storage).resolve()),
                                  callbacks=[book, *tracking_callbacks(tracking, name)],
                                  verbose=0, stop=stopper,
                                  failure_config=tune.FailureConfig(max_failures=0)),
    )
    tuner.fit()
    if stopper.reason is not None:
        book.close("cancelled", stopper.reason)
    # every trial's output is recorded; what a stopped trial's thread wrote after its last
    # report (already collected) is not kept on disk
    shutil.rmtree(log_dir, ignore_errors=True)
    return RunOutcome(list(book.trials.values()), core, stopper.reason)
