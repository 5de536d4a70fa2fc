"""The target run's plumbing between Ray Train and the driver (`ray_train.py`): the stop
flag the driver sets (``mutune cancel``), the controller callback that relays every report
and worker failure into the driver's queue, and the handle the book records the run by."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunHandle", "relay", "stop_flag", "preemptible_torch_config"]


def stop_flag() -> Any:
    """A Ray actor holding one flag: ``set`` (the driver), ``get`` (the leading worker)."""
    import ray

    @ray.remote(num_cpus=0)
    class StopFlag:
        """Set by the driver (``mutune cancel``); read by the leading worker."""

        def __init__(self) -> None:
            self.value = False

        def set(self) -> None:
            self.value = True

        def get(self) -> bool:
            return self.value

    return StopFlag.remote()


def relay(queue: Any) -> Any:
    """A Ray Train ``UserCallback`` putting each report and worker failure into ``queue``."""
    from ray.train.v2.api.callback import UserCallback

    class Relay(UserCallback):
        """On Ray Train's controller: every report (the leading worker's metrics and the
        persisted checkpoint's path) and every worker failure, into the driver's queue."""

        def after_report(self, run_context: Any, metrics: list, checkpoint: Any) -> None:
            queue.put({"metrics": dict(metrics[0]),
                       "checkpoint": checkpoint.path if checkpoint is not None else None})

        def after_exception(self, run_context: Any, worker_exceptions: dict) -> None:
            queue.put({"failure": {int(k): repr(v)[:500]
                                   for k, v in worker_exceptions.items()}})

    return Relay()


@dataclass
class RunHandle:
    """What :class:`~.ray_tune.callback.SweepBook` reads of a Ray trial, for the Ray Train
    run: its id, config (the point) and folder."""
    trial_id: str
    config: dict[str, Any]
    path: str
    error: str | None = None

    def get_error(self) -> str | None:
        return self.error


def preemptible_torch_config(backend: str) -> Any:
    """Ray Train's ``TorchConfig`` for ``backend`` (``gloo``/``nccl``) whose set-up also installs
    mutune's SIGTERM notice handler in every worker actor's main thread (Ray Train runs the
    training loop in another thread, where no handler can be installed; its backend's
    ``on_start`` runs a function on each worker through an actor method, which runs in the
    actor's main thread)."""
    from ray.train.torch import TorchConfig

    from mutune.search.trial.preemption import install_sigterm

    base = TorchConfig(backend=backend).backend_cls

    class PreemptibleBackend(base):  # type: ignore[misc, valid-type]
        def on_start(self, worker_group: Any, backend_config: Any) -> None:
            super().on_start(worker_group, backend_config)
            worker_group.execute(install_sigterm)

    class PreemptibleTorchConfig(TorchConfig):
        @property
        def backend_cls(self) -> Any:
            return PreemptibleBackend

    return PreemptibleTorchConfig(backend=backend)
