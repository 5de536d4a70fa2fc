"""One group's run on Ray from the flat keywords a test writes: the keywords are split into the
group's :class:`GroupSpec` fields, its :class:`CheckpointPolicy` and the run's
:class:`RunSettings` (the backend seam the pipeline uses), then run by :class:`RayBackend`."""
from __future__ import annotations

import dataclasses
from typing import Any

from mutune.search.backends.base import CheckpointPolicy, RunSettings, run_group
from mutune.search.backends.groups import GroupSpec, RunOutcome

_SPEC = {"proxy_sweep_id", "searcher", "seeds", "replicates", "core", "resume", "on_progress",
         "diverge_above"}
_CHECKPOINTS = {"checkpoint_every": "every", "checkpoint_keep": "keep",
                "checkpoint_max_share": "max_share", "keep_final": "keep_final",
                "spot": "spot"}


def split(points: list[dict[str, Any]] | None, **kw: Any) -> tuple[GroupSpec, RunSettings]:
    """The (group, run settings) of ``run_trials``' keywords (``width``, ``group`` and the
    GroupSpec fields; ``checkpoint_*``, ``keep_final``, ``spot``; the rest RunSettings')."""
    width = kw.pop("width")
    spec = GroupSpec(width, kw.pop("proxy_sweep_id", None), kw.pop("group", None)
                     or f"w{width}", points=points,
                     **{k: kw.pop(k) for k in list(kw) if k in _SPEC})
    ck = {v: kw.pop(k) for k, v in _CHECKPOINTS.items() if k in kw}
    if ck.get("spot") is None:
        ck.pop("spot", None)
    kw["callbacks"] = tuple(kw.get("callbacks") or ())
    known = {f.name for f in dataclasses.fields(RunSettings)}
    unknown = set(kw) - known
    if unknown:
        raise TypeError(f"unknown run keywords: {sorted(unknown)}")
    return spec, RunSettings(checkpoints=CheckpointPolicy(**ck), **kw)


def run_trials(points: list[dict[str, Any]] | None, **kw: Any) -> RunOutcome:
    """Run one group on Ray (:func:`split`, then :func:`run_group` on a RayBackend)."""
    from mutune.search.backends.ray_tune.backend import RayBackend

    spec, settings = split(points, **kw)
    return run_group(RayBackend(), spec, settings)


def run_target(point: dict[str, Any], *, num_workers: int, **kw: Any) -> RunOutcome:
    """The target on ``num_workers`` Ray Train workers (its model kept at ``max_t`` unless
    ``keep_final=False``)."""
    from mutune.search.backends.ray_train_run import run_target as train_target

    kw.setdefault("keep_final", True)
    spec, settings = split([point], kind="target", group="target", **kw)
    return train_target(spec, settings, num_workers)
