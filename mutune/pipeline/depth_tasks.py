"""The depth ladder's sizes and the tasks that build a model at another depth
(docs/transfer.md §10).

With ``depths: [L₁, L₂, …]`` beside ``widths:``, every (width, depth) is a proxy of its own:
its own proxy sweep row (``settings["depth"]``), scheduler core, searcher and trial stream
(proxy number = its position in :func:`ladder_sizes`, which seeds its trials), all in one Ray
Tune run (:func:`mutune.pipeline.proxy_stage.sweep_ladder`; trial keys
``w{width}d{depth}-t{i}``).
A depth's model is the config's model section at that depth, with its own μP base shapes
(a deeper model has more parameters to give shapes to) and, under CompleteP or Depth-μP, its
residual branches and per-group learning rates scaled against ``model.base_depth`` (the
smallest depth by default; :mod:`mutune.proxies.depth`). The target trains at
``target.depth`` the same way (:func:`target_task`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mutune.config import SweepConfig
from mutune.pipeline.sweep import SweepRun

__all__ = ["ladder_sizes", "issue_order", "task_with_depth", "task_at_depth", "target_task"]


def ladder_sizes(config: SweepConfig) -> list[tuple[int, int]]:
    """Every proxy (width, depth) in proxy-number order: depth by depth, widths increasing
    within each (the last is the widest, deepest)."""
    return [(w, d) for d in config.proxy_depths for w in config.widths]


def issue_order(spec: Any) -> tuple[int, int]:
    """Sort key of a proxy group (:class:`~mutune.search.backends.groups.GroupSpec`)
    in a Ray Tune run: widest first, and on a depth ladder deepest first within a width (its
    own task holds its depth) — the longest trials first, the shortest fill the tail."""
    return -spec.width, -(spec.task.model.depth if spec.task is not None else 0)


def task_with_depth(task: Any, depth: int | None) -> Any:
    """``task`` (a :class:`~mutune.proxies.task.ProxyTask`) with its model at ``depth`` and
    that depth's μP base shapes; ``task`` itself at its own depth (or ``depth`` None)."""
    if depth is None or task.model.depth == depth:
        return task
    model = task.model.model_copy(update={"depth": int(depth)})
    return dataclasses.replace(task, model=model, base_shapes=None).with_base_shapes()


def task_at_depth(run: SweepRun, depth: int) -> Any:
    """``run.task`` at ``depth`` (:func:`task_with_depth`), computed once per depth and kept
    in ``run.depth_tasks``."""
    if run.task.model.depth == depth:
        return run.task
    if depth not in run.depth_tasks:
        run.depth_tasks[depth] = task_with_depth(run.task, depth)
    return run.depth_tasks[depth]


def target_task(run: SweepRun) -> Any:
    """The task the target run trains (and its parameters are counted) with: the model at
    ``target.depth`` (:func:`task_at_depth`)."""
    return task_at_depth(run, run.config.target_depth)
