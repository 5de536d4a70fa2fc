"""What one trial trains, typed: :class:`TrialSpec` (and its searched :class:`TrialPoint`)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mutune.errors import SearchError

__all__ = ["TrialSpec", "TrialPoint"]


@dataclass(frozen=True)
class TrialPoint:
    """The searched point one trial trains."""
    hparams: Mapping[str, Any]
    seed: int
    index: int = 0
    replicate_seeds: tuple[int, ...] = ()
    width: int | None = None
    task: str | None = None

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds of the trial's models: its replicates', or its own."""
        return self.replicate_seeds or (self.seed,)


@dataclass(frozen=True)
class TrialSpec:
    """One trial's training settings."""
    width: int
    max_t: int
    point: TrialPoint
    threads: int = 1
    gpus: float = 0.0
    checkpoint_every: int | str = 0
    spot: Mapping[str, Any] | None = None
    checkpoint_max_share: float | None = None
    checkpoint_at: tuple[int, ...] = ()
    keep_final: bool = False
    metric: str = "val_loss"
    diverge_above: Mapping[int, float] = field(default_factory=dict)
    preemption: Mapping[str, Any] | None = None
    test_at_max_t: bool = True

    @property
    def trial_width(self) -> int:
        """The width this trial trains: its point's own, or the run's."""
        return self.point.width or self.width

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TrialSpec:
        """Read a worker's config dict.

        Raises:
            SearchError: ``width``, ``max_t`` or ``point`` missing, or a bad ``max_t``."""
        point = config.get("point") or {}
        missing = [k for k in ("max_t", "point") if config.get(k) is None]
        if config.get("width") is None and point.get("width") is None:
            missing.append("width")
        missing += [f"point.{k}" for k in ("hparams", "seed") if point.get(k) is None]
        if missing:
            raise SearchError(f"trial config lacks {', '.join(missing)}: a trial needs width "
                              "(or point.width), max_t and point = {hparams, seed}")
        max_t = config["max_t"]
        if isinstance(max_t, bool) or not isinstance(max_t, (int, float)) or max_t < 1 \
                or not math.isfinite(max_t) or int(max_t) != max_t:
            raise SearchError(f"trial config max_t = {max_t!r}: must be a whole number >= 1")
        return cls(
            width=int(config.get("width") or point["width"]), max_t=int(max_t),
            point=_point(point),
            threads=int(config.get("threads") or 1), gpus=float(config.get("gpus") or 0),
            checkpoint_every=_every(config.get("checkpoint_every")),
            spot=config.get("spot"), checkpoint_max_share=config.get("checkpoint_max_share"),
            checkpoint_at=tuple(sorted(int(m) for m in config.get("checkpoint_at") or ())),
            keep_final=bool(config.get("keep_final")),
            metric=str(config.get("metric") or "val_loss"),
            diverge_above={int(k): float(v)
                           for k, v in (config.get("diverge_above") or {}).items()},
            preemption=config.get("preemption"),
            test_at_max_t=bool(config.get("test_at_max_t", True)))


def _point(point: Mapping[str, Any]) -> TrialPoint:
    width = point.get("width")
    task = point.get("task")
    return TrialPoint(hparams=dict(point["hparams"]), seed=int(point["seed"]),
                      index=int(point.get("index") or 0),
                      replicate_seeds=tuple(int(s) for s in point.get("replicate_seeds") or ()),
                      width=None if width is None else int(width),
                      task=None if task is None else str(task))


def _every(every: Any) -> int | str:
    return "auto" if every == "auto" else int(every or 0)
