"""One sweep in progress: what every stage of the main job shares, and how it is opened.

:func:`open_sweep` loads the data, computes the μP base shapes once, records the sweep (or
continues a recorded one) and holds the backend's cluster (Ray's by default) for the block;
the :class:`SweepRun` it yields is the first argument of every stage function, so the main
job, the resume, the checks and the benchmarks drive the same code. :class:`ProxyResult` and
:class:`PipelineResult` are what the stages hand on.
"""
from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mutune.config import SweepConfig
from mutune.errors import SweepStopped
from mutune.pipeline.recording import Recorder
from mutune.search.backends.base import Backend, RunSettings
from mutune.search.recording import SweepControl

__all__ = ["SweepRun", "open_sweep", "ProxyResult", "PipelineResult", "Progress",
           "bind_progress", "record_best", "stage_settings", "default_backend"]


@dataclass(frozen=True)
class ProxyResult:
    """One width's sweep (one (width, depth)'s on a depth ladder): its best trial at rung
    ``milestone`` (steps) and value there, and the smoothed optimum of each hyperparameter
    (:func:`mutune.pipeline.transfer_stage.width_optimum`)."""
    width: int
    proxy_sweep_id: int
    best_trial_id: int
    best_config: dict[str, float]
    best_val_loss: float
    milestone: int
    trials: int
    optimum: dict[str, Any] = field(default_factory=dict)
    #: the proxy's depth on a depth ladder (``depths``); None: the one ``model.depth``
    depth: int | None = None

    @property
    def size(self) -> int | tuple[int, int]:
        """The proxy's key among the sweep's proxies: its width, or (width, depth) on a
        depth ladder."""
        return self.width if self.depth is None else (self.width, self.depth)


@dataclass(frozen=True)
class PipelineResult:
    """What the main job produced; every figure is also in the recorder."""
    sweep_id: int
    proxies: list[ProxyResult]
    rules: list[dict[str, Any]]
    target: dict[str, Any]
    cost: dict[str, Any] = field(default_factory=dict)


Progress = Callable[[str, int, int], None]


def default_backend() -> Backend:
    """Ray Tune and Ray Train (:class:`~mutune.search.backends.ray_tune.backend.RayBackend`)."""
    from mutune.search.backends.ray_tune.backend import RayBackend

    return RayBackend()


@dataclass
class SweepRun:
    """One sweep in progress: what every stage needs (config, recorder, task, ids, counters).

    Made by :func:`open_sweep`; the stage functions below take it as their first argument, so
    the main job, the benchmarks and the checks drive the same code.
    """
    config: SweepConfig
    recorder: Recorder
    task: Any
    sweep_id: int
    out_dir: Path
    seq: itertools.count
    on_progress: Progress | None = None
    #: the sweep's :class:`~mutune.search.budget.SweepBudget` when the config sets a budget
    budget: Any = None
    #: heartbeats and stop requests (usually the recorder itself, the results store)
    control: SweepControl | None = None
    #: a resumed sweep's recorded trial rows by key (``Store.sweep_rows``), for the stages
    #: after the proxy sweeps to continue what they had started instead of redoing it
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: a resumed sweep's latest target-run row (``Store.sweep_rows()["target"]``), or None
    recorded_target: dict[str, Any] | None = None
    #: when the sweep was submitted (``time.monotonic()``, the trials' clock): the span of
    #: the sweep's held device-seconds starts here, start-up included
    started_at: float | None = None
    #: the Ray cluster's total resources (``ray.cluster_resources()``) once it is up
    resources: dict[str, float] | None = None
    #: depth → the task at that depth, with its own base shapes, on a depth ladder
    #: (:func:`mutune.pipeline.depth_ladder.task_at_depth`)
    depth_tasks: dict[int, Any] = field(default_factory=dict)
    #: what runs the trials (:class:`~mutune.search.backends.base.Backend`)
    backend: Backend = field(default_factory=default_backend)


@contextlib.contextmanager
def open_sweep(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
               on_progress: Progress | None = None,
               resume: tuple[int, int] | None = None,
               control: SweepControl | None = None,
               backend: Backend | None = None) -> Iterator[SweepRun]:
    """Load the data, compute the μP base shapes once (saved as ``out_dir/base_shapes.bsh``
    and in the sweep's provenance), record the sweep and hold the backend's cluster for the block.

    ``control`` takes heartbeats and answers stop requests (default: ``recorder`` when it
    is also a :class:`~mutune.search.recording.SweepControl`, as the results store is).
    ``backend`` runs the trials (:class:`~mutune.search.backends.base.Backend`; default
    Ray, :class:`~mutune.search.backends.ray_tune.backend.RayBackend`).

    ``resume`` = (sweep id, last sequence number recorded) continues a recorded sweep instead
    of starting one: no new sweep row, and sequence numbers go on after the last.

    The sweep is recorded ``completed`` when the block ends normally, with the status of a
    :class:`~mutune.errors.SweepStopped` (``cancelled``, ``budget_exhausted``) when the block
    raises one (re-raised with the sweep id), and ``failed`` with the reason when it raises
    anything else (the error propagates; rows recorded before stay).
    """
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.pipeline.devices import with_granted_device
    from mutune.pipeline.provenance import collect_provenance

    started_at = time.monotonic()
    run_on = backend if backend is not None else default_backend()
    data = load_task_data(config)
    dataset = {"kind": config.data.kind, "fingerprint": data.fingerprint,
               "size_bytes": data.size_bytes}
    task = ProxyTask(config.model, config.train, data).with_base_shapes()
    if config.target.parallelism == "fsdp":      # before any device time is spent
        from mutune.search.backends.ray_train import refuse_sharded
        refuse_sharded(task.build(config.model.base_width, {}))
    provenance = collect_provenance(dataset)
    if task.base_shapes is not None:
        provenance["base_shapes"] = task.base_shapes
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "base_shapes.bsh").write_text(task.base_shapes)
    scaling = getattr(config.model, "depth_scaling", None)
    if callable(scaling):       # the depth base, beside the width base shapes
        d = scaling()
        provenance["depth_base"] = {"depth_parametrization": d.parametrization,
                                    "base_depth": d.base_depth, "depth": d.depth,
                                    "alpha": d.alpha, "branch_multiplier": d.branch_multiplier}
    if resume is None:
        from mutune.pipeline.preflight_checks import run_preflight

        checked = run_preflight(config, task)       # before anything is recorded or trained
        sweep_id = recorder.sweep_started(config.model_dump(mode="json"), config.seed,
                                          provenance)
        recorder.check_recorded(sweep_id, checked)
        first_seq = 1
    else:
        sweep_id, first_seq = resume[0], resume[1] + 1
        recorder.sweep_resumed(sweep_id)
    try:
        limit = config.budget.limit_gpu_hours
        gate = None
        if limit is not None:
            from mutune.search.budget import SweepBudget
            gate = SweepBudget(limit)
        if control is None and isinstance(recorder, SweepControl):
            control = recorder
        with run_on.cluster(config.ray) as resources:
            # the ledger prices the device the trials are granted (ray.device_kind, or what
            # Ray detected on the cluster)
            run = SweepRun(with_granted_device(config, resources), recorder, task, sweep_id,
                           Path(out_dir), itertools.count(first_seq), on_progress, gate,
                           control, started_at=started_at, resources=resources,
                           backend=run_on)
            yield run
    except SweepStopped as stop:
        recorder.sweep_finished(sweep_id, stop.status, stop.reason)
        raise SweepStopped(stop.status, stop.reason, sweep_id) from None
    except BaseException as err:
        recorder.sweep_finished(sweep_id, "failed", f"{type(err).__name__}: {err}"[:2000])
        raise
    recorder.sweep_finished(sweep_id, "completed")


def stage_settings(run: SweepRun, *, name: str, max_t: int, **more: Any) -> RunSettings:
    """A stage's :class:`~mutune.search.backends.base.RunSettings`: the sweep's recorder,
    control, counter, task, storage (``out_dir/ray``), ``ray`` section, metric and mode,
    with ``more`` (any other field, or one of these replaced)."""
    config = run.config
    base: dict[str, Any] = dict(
        task=run.task, max_t=max_t, recorder=run.recorder, sweep_id=run.sweep_id,
        ray_cfg=config.ray, storage=run.out_dir / "ray", name=name, seq=run.seq,
        control=run.control, metric=config.search.metric, mode=config.search.mode)
    return RunSettings(**{**base, **more})


def bind_progress(cb: Progress | None, label: str, total: int
                  ) -> Callable[[int, int], None] | None:
    """``cb`` bound to one stage's ``label`` and ``total``: (done, started) → cb(label, done,
    total); None when there is no ``cb``."""
    if cb is None:
        return None
    return lambda done, started: cb(label, done, total)


def record_best(run: SweepRun, p: ProxyResult, rung_trials: int) -> None:
    """Record the width's best trial and optimum on its proxy sweep row."""
    run.recorder.proxy_sweep_finished(p.proxy_sweep_id, {
        "trial_id": p.best_trial_id, "milestone": p.milestone, "config": p.best_config,
        "val_loss": p.best_val_loss, "trials": p.trials, "rung_trials": rung_trials,
        "optimum": p.optimum})
