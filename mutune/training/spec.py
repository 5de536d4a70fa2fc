"""What one trial trains, typed: :class:`TrialSpec` (and its searched :class:`TrialPoint`).

A trial's settings travel to its worker as Ray Tune's config, a plain dict (the searchers'
points are dicts, and so is Ray Train's ``train_loop_config``). :meth:`TrialSpec.from_config`
reads that dict once, at the worker's edge, into frozen values; everything inside
:mod:`mutune.training` reads the spec. Keys the training run does not use (the driver's and
Ray's: ``log_dir``, ``decide_at``, ``storage`` …) are left to the code that reads them.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mutune.errors import SearchError

__all__ = ["TrialSpec", "TrialPoint"]


@dataclass(frozen=True)
class TrialPoint:
    """The searched point one trial trains.

    Attributes:
        hparams: {name: value} of the trial's hyperparameters (``lr`` at least).
        seed: the trial's seed (its initialisation and its batches).
        index: the trial's number in its group.
        replicate_seeds: seeds of the models trained in lockstep (empty: ``seed`` alone).
        width: the trial's own hidden width, in a run of several widths (None: the run's).
        task: the task of the trial's group, in a run whose groups train different models.
    """
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
    """One trial's training settings.

    Attributes:
        width: the run's hidden width (a point's own ``width`` overrides it).
        max_t: the run's last step (steps).
        point: the searched :class:`TrialPoint`.
        threads: torch intra-op threads.
        gpus: GPUs per trial (> 0: CUDA with bf16 autocast).
        checkpoint_every: steps between periodic checkpoints (0: off), or ``"auto"``
            (:class:`~mutune.search.trial.cadence.Cadence`, with ``spot``).
        spot: the ``cost.spot`` section as a dict (``auto``'s mean time between preemptions).
        checkpoint_max_share: the largest share of the run's time checkpoints may take.
        checkpoint_at: steps to checkpoint at or just past (the rung milestones).
        keep_final: also checkpoint the trained model at ``max_t`` (the target run).
        metric: the sweep's metric (``search.metric``).
        diverge_above: {step: value}: the run ends as diverged after a report above it by
            more than three standard errors (:func:`mutune.search.driver.types.beyond_limit`).
        preemption: the ``ray.preemption`` section (notice file and URL to poll), or None.
        test_at_max_t: whether the evaluation at ``max_t`` includes the test split.
    """
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
        """Read a worker's config dict (the keys of the attributes, ``point`` a dict).

        Raises:
            SearchError: a required key (``width`` or ``point.width``, ``max_t``, ``point``
                with ``hparams`` and ``seed``) is missing, or ``max_t`` is not a whole number >= 1.
        """
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
