"""The backend seam: what every run of a sweep stage is given (:class:`RunSettings`) and what
executes it (:class:`Backend`)."""
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
    """When a run's trials checkpoint and what stays on disk."""
    every: int | str = 0
    keep: int = 1
    max_share: float | None = None
    keep_final: bool = False
    spot: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSettings:
    """What every group of one run shares."""
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
    """What executes a sweep's runs: a cluster for the sweep, its groups, the target."""
    keeps_models: bool

    def cluster(self, ray_cfg: RayConfig) -> AbstractContextManager[dict[str, float] | None]:
        """Hold the cluster for the sweep's block; yields its total resources
        (``{"CPU": n, "GPU": m, …}``), or None: the config's ``ray`` section says them."""
        ...

    def run_groups(self, specs: list[GroupSpec], settings: RunSettings,
                   follow_up: Any = None) -> dict[str, RunOutcome]:
        """Run every group of ``specs`` in one run sharing its slots; group name → outcome
        (the joined ``follow_up`` groups' too; :mod:`mutune.search.backends.joining`)."""
        ...

    def run_target(self, spec: GroupSpec, settings: RunSettings,
                   num_workers: int) -> RunOutcome:
        """Train the target (the one point of ``spec``, or its resumed trial) on
        ``num_workers`` data-parallel workers."""
        ...


def run_group(backend: Backend, spec: GroupSpec, settings: RunSettings) -> RunOutcome:
    """One group's run (:meth:`Backend.run_groups` with ``[spec]``)."""
    return backend.run_groups([spec], settings)[spec.group]

