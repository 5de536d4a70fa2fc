"""The backend seam: what every run of a sweep stage is given (:class:`RunSettings`) and what
executes it (:class:`Backend`).

A stage of the main job — the proxy sweeps, a confirmation design, a gate round, the target
run — hands its groups (:class:`~mutune.search.backends.groups.GroupSpec`, one width's
trials each) and one :class:`RunSettings` to the sweep's backend, and gets back each group's
:class:`~mutune.search.backends.groups.RunOutcome`. Ray Tune and Ray Train implement it
(:class:`mutune.search.backends.ray_tune.backend.RayBackend`); so does the simulator
(:class:`mutune.search.backends.simulated_run.SimulatedBackend`), which runs the same driver
and records the same rows on synthetic curves, so the whole main job runs without Ray.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mutune.config import RayConfig, SchedulerConfig, TrackingConfig
    from mutune.search.backends.groups import GroupSpec, RunOutcome
    from mutune.search.budget import SweepBudget
    from mutune.search.recording import SweepControl, TrialRecorder

__all__ = ["CheckpointPolicy", "RunSettings", "Backend", "run_group"]


@dataclass(frozen=True)
class CheckpointPolicy:
    """When a run's trials checkpoint and what stays on disk.

    Attributes:
        every: also checkpoint every this many steps (0: only at rung milestones under
            promotion, and on a preemption notice), or ``"auto"``: Young's interval from
            ``spot`` (:class:`~mutune.search.trial.cadence.Cadence`).
        keep: checkpoints kept per trial: the best this many by the metric, plus always the
            latest; a stopped or diverged trial's are deleted when it ends.
        max_share: hold a periodic checkpoint back until its mean seconds are at most this
            share of the time since the last one; None: every interval exactly.
        keep_final: also checkpoint each trial's model at ``max_t`` (the target run: its
            model is kept and exported).
        spot: the config's ``cost.spot`` section as a dict (preemption rate, restart cost),
            for ``every="auto"``.
    """
    every: int | str = 0
    keep: int = 1
    max_share: float | None = None
    keep_final: bool = False
    spot: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSettings:
    """What every group of one run shares.

    Attributes:
        task: the :class:`~mutune.proxies.task.ProxyTask` the trials train, or name → task
            when groups carry tasks of their own (shipped once to the workers).
        max_t: steps a trial trains at most.
        recorder: where trial rows go (:class:`~mutune.search.recording.TrialRecorder`).
        sweep_id: the recorder's sweep row.
        ray_cfg: the config's ``ray`` section (slots, per-trial resources, timeouts).
        storage: folder for the run's state and the trials' checkpoints.
        name: the run's name (its folder under ``storage``).
        seq: the sweep's sequence counter (one number per recorded event).
        kind: the trials' recorded kind (``proxy``, ``confirm``, ``target`` …).
        scheduler: ASHA/Hyperband settings of every group, or None: every trial runs to
            ``max_t`` (a design, the target).
        metric, mode: what the scheduler and the best trial read (``val_loss``, ``min``).
        scheduler_seed: seeds Hyperband's bracket assignment.
        control: heartbeats and stop requests; None: the recorder when it answers
            ``stop_requested`` (the results store does).
        on_started: called with a trial's recorder id when it starts.
        checkpoints: :class:`CheckpointPolicy`.
        callbacks: extra Ray Tune callbacks (driver side).
        budget: the sweep's GPU-hour budget, or None.
        tracking: the config's ``tracking`` section (Ray Tune's loggers), or None.
        trainable: the Ray function trainable (default: mutune's, on ``task``).
    """
    task: Any
    max_t: int
    recorder: TrialRecorder
    sweep_id: int
    ray_cfg: RayConfig
    storage: Path
    name: str
    seq: itertools.count[int]
    kind: str = "proxy"
    scheduler: SchedulerConfig | None = None
    metric: str = "val_loss"
    mode: str = "min"
    scheduler_seed: int = 0
    control: SweepControl | None = None
    on_started: Callable[[int], None] | None = None
    checkpoints: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    callbacks: tuple[Any, ...] = ()
    budget: SweepBudget | None = None
    tracking: TrackingConfig | None = None
    trainable: Callable[..., Any] | None = None

    @property
    def controller(self) -> SweepControl | None:
        """``control``, or the recorder when it answers stop requests."""
        if self.control is None and hasattr(self.recorder, "stop_requested"):
            return self.recorder  # type: ignore[return-value]
        return self.control


class Backend(Protocol):
    """What executes a sweep's runs: a cluster for the sweep, its groups, the target.

    Attributes:
        keeps_models: whether a completed trial leaves its trained model in a checkpoint
            (the target's model is then kept and exported; the simulator trains none).
    """
    keeps_models: bool

    def cluster(self, ray_cfg: RayConfig) -> AbstractContextManager[dict[str, float] | None]:
        """Hold the cluster for the sweep's block; yields its total resources
        (``{"CPU": n, "GPU": m, …}``), or None: the config's ``ray`` section says them."""
        ...

    def run_groups(self, specs: list[GroupSpec], settings: RunSettings,
                   follow_up: Any = None) -> dict[str, RunOutcome]:
        """Run every group of ``specs`` in one run sharing its slots; group name → outcome
        (the joined ``follow_up`` groups' too; :mod:`mutune.search.backends.joining`).
        """
        ...

    def run_target(self, spec: GroupSpec, settings: RunSettings,
                   num_workers: int) -> RunOutcome:
        """Train the target (the one point of ``spec``, or its resumed trial) on
        ``num_workers`` data-parallel workers."""
        ...


def run_group(backend: Backend, spec: GroupSpec, settings: RunSettings) -> RunOutcome:
    """One group's run (:meth:`Backend.run_groups` with ``[spec]``)."""
    return backend.run_groups([spec], settings)[spec.group]

