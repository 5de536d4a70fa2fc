"""One sweep in progress: what every stage of the main job shares (:class:`SweepRun`), and how
it is opened (:func:`open_sweep`)."""
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
from mutune.pipeline.optimum_record import WidthOptimum
from mutune.pipeline.recording import Recorder
from mutune.search.backends.base import Backend, RunSettings
from mutune.search.recording import SweepControl

__all__ = ["SweepRun", "open_sweep", "ProxyResult", "PipelineResult", "Progress",
           "bind_progress", "record_best", "stage_settings", "default_backend"]


@dataclass(frozen=True)
class ProxyResult:
    """One proxy's sweep: its best trial at rung ``milestone`` (steps) and its smoothed optimum."""
    width: int
    proxy_sweep_id: int
    best_trial_id: int
    best_config: dict[str, float]
    best_val_loss: float
    milestone: int
    trials: int
    optimum: WidthOptimum | None = None
    #: the proxy's depth on a depth ladder (``depths``); None: the one ``model.depth``
    depth: int | None = None

    @property
    def size(self) -> int | tuple[int, int]:
        """The proxy's key: its width, or (width, depth) on a depth ladder."""
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
    from mutune.search.backends.ray_tune.backend import RayBackend

    return RayBackend()


@dataclass
class SweepRun:
    """One sweep in progress: what every stage needs; made by :func:`open_sweep`."""
    config: SweepConfig
    recorder: Recorder
    task: Any
    sweep_id: int
    out_dir: Path
    seq: itertools.count
    on_progress: Progress | None = None
    #: the sweep's :class:`~mutune.search.budget.SweepBudget` when the config sets a budget
    budget: Any = None
    control: SweepControl | None = None
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: a resumed sweep's latest target-run row (``Store.sweep_rows()["target"]``), or None
    recorded_target: dict[str, Any] | None = None
    #: when the sweep was submitted (``time.monotonic()``, the trials' clock): the span of
    #: the sweep's held device-seconds starts here, start-up included
    started_at: float | None = None
    resources: dict[str, float] | None = None
    depth_tasks: dict[int, Any] = field(default_factory=dict)
    backend: Backend = field(default_factory=default_backend)


@contextlib.contextmanager
def open_sweep(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
               on_progress: Progress | None = None,
               resume: tuple[int, int] | None = None,
               control: SweepControl | None = None,
               backend: Backend | None = None,
               own_folder: bool = False) -> Iterator[SweepRun]:
    """Load the data, compute the μP base shapes once, record the sweep (or continue ``resume`` =
    (sweep id, last sequence number)) and hold the backend's cluster for the block.

    The sweep writes into ``out_dir``; with ``own_folder`` a new sweep writes into
    ``out_dir/sweep-<ID>/`` instead (:func:`mutune.pipeline.run_folder.fresh_sweep_folder`).

    The sweep is recorded ``completed`` when the block ends normally, with a
    :class:`~mutune.errors.SweepStopped`'s status (re-raised with the sweep id), else ``failed``
    with the reason (the error propagates)."""
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.pipeline.devices import with_granted_device
    from mutune.pipeline.provenance import collect_provenance

    started_at = time.monotonic()
    run_on = backend if backend is not None else default_backend()
    data = load_task_data(config)
    dataset = {"kind": config.data.kind, "fingerprint": data.fingerprint,
               "size_bytes": data.size_bytes}
    task = ProxyTask(config.model, config.train, data).with_base_shapes()
    if config.target.parallelism == "fsdp":
        from mutune.search.backends.ray_train import refuse_sharded
        refuse_sharded(task.build(config.model.base_width, {}))
    provenance = collect_provenance(dataset)
    if task.base_shapes is not None:
        provenance["base_shapes"] = task.base_shapes
    scaling = getattr(config.model, "depth_scaling", None)
    if callable(scaling):
        d = scaling()
        provenance["depth_base"] = {"depth_parametrization": d.parametrization,
                                    "base_depth": d.base_depth, "depth": d.depth,
                                    "alpha": d.alpha, "branch_multiplier": d.branch_multiplier}
    if resume is None:
        from mutune.pipeline.preflight_checks import run_preflight

        checked = run_preflight(config, task)
        sweep_id = recorder.sweep_started(config.model_dump(mode="json"), config.seed,
                                          provenance)
        recorder.check_recorded(sweep_id, checked)
        first_seq = 1
    else:
        sweep_id, first_seq = resume[0], resume[1] + 1
        recorder.sweep_resumed(sweep_id)
    try:
        out = Path(out_dir)
        if own_folder and resume is None:
            from mutune.pipeline.run_folder import fresh_sweep_folder
            out = fresh_sweep_folder(out, sweep_id)
        if task.base_shapes is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "base_shapes.bsh").write_text(task.base_shapes)
        limit = config.budget.limit_gpu_hours
        gate = None
        if limit is not None:
            from mutune.search.budget import SweepBudget
            gate = SweepBudget(limit)
        if control is None and isinstance(recorder, SweepControl):
            control = recorder
        with run_on.cluster(config.ray) as resources:
            run = SweepRun(with_granted_device(config, resources), recorder, task, sweep_id,
                           out, itertools.count(first_seq), on_progress, gate,
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
    """A stage's RunSettings from the sweep, with ``more`` added or replaced."""
    config = run.config
    base: dict[str, Any] = dict(
        task=run.task, max_t=max_t, recorder=run.recorder, sweep_id=run.sweep_id,
        ray_cfg=config.ray, storage=run.out_dir / "ray", name=name, seq=run.seq,
        control=run.control, metric=config.search.metric, mode=config.search.mode)
    return RunSettings(**{**base, **more})


def bind_progress(cb: Progress | None, label: str, total: int
                  ) -> Callable[[int, int], None] | None:
    """``cb`` bound to one stage's ``label`` and ``total``; None when there is no ``cb``."""
    if cb is None:
        return None
    return lambda done, started: cb(label, done, total)


def record_best(run: SweepRun, p: ProxyResult, rung_trials: int) -> None:
    run.recorder.proxy_sweep_finished(p.proxy_sweep_id, {
        "trial_id": p.best_trial_id, "milestone": p.milestone, "config": p.best_config,
        "val_loss": p.best_val_loss, "trials": p.trials, "rung_trials": rung_trials,
        "optimum": p.optimum.as_json() if p.optimum else {}})
