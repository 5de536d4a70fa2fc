"""Ray as the sweep's :class:`~mutune.search.backends.base.Backend`: a local cluster (or
``ray.address``) held for the sweep, its groups as one Ray Tune run, the target on Ray Train
when it has more than one worker and as a Ray Tune trial holding its CPUs otherwise."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mutune.config import RayConfig
from mutune.search.backends.base import RunSettings
from mutune.search.backends.groups import GroupSpec, RunOutcome

__all__ = ["RayBackend"]


class RayBackend:
    """Runs a sweep's stages on Ray Tune and Ray Train (imports Ray when used)."""
    keeps_models = True

    @contextlib.contextmanager
    def cluster(self, ray_cfg: RayConfig) -> Iterator[dict[str, float] | None]:
        """Start (or join) the Ray cluster for the block; yields its total resources."""
        import ray

        from mutune.search.backends.ray_tune.cluster import ray_cluster

        with ray_cluster(ray_cfg):
            yield dict(ray.cluster_resources())

    def run_groups(self, specs: list[GroupSpec], settings: RunSettings,
                   follow_up: Any = None) -> dict[str, RunOutcome]:
        """One Ray Tune run (:func:`~.run.run_groups`)."""
        from mutune.search.backends.ray_tune.run import run_groups

        return run_groups(specs, settings, follow_up)

    def run_target(self, spec: GroupSpec, settings: RunSettings,
                   num_workers: int) -> RunOutcome:
        """Ray Train with DDP on ``num_workers`` > 1 (:func:`~..ray_train_run.run_target`);
        one Ray Tune trial otherwise."""
        if num_workers > 1:
            from mutune.search.backends.ray_train_run import run_target

            return run_target(spec, settings, num_workers)
        return self.run_groups([spec], settings)[spec.group]
