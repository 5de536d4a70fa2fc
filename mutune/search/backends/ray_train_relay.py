"""The target run's plumbing between Ray Train and the driver (`ray_train.py`): the stop
flag the driver sets (``mutune cancel``), the controller callback that relays every report
and worker failure into the driver's queue, and the handle the book records the run by.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunHandle", "relay", "stop_flag"]


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
