"""The depth ladder's sizes and the tasks that build a model at another depth
(docs/transfer.md §10): every (width, depth) is a proxy of its own, all in one Ray Tune run."""
from __future__ import annotations

import dataclasses
from typing import Any

from mutune.config import SweepConfig
from mutune.pipeline.sweep import SweepRun

__all__ = ["ladder_sizes", "issue_order", "task_with_depth", "task_at_depth", "target_task"]


def ladder_sizes(config: SweepConfig) -> list[tuple[int, int]]:
    """Every proxy (width, depth) in proxy-number order: depth by depth, widths increasing."""
    return [(w, d) for d in config.proxy_depths for w in config.widths]


def issue_order(spec: Any) -> tuple[int, int]:
    """Sort key of a proxy group: widest first, then deepest — the longest trials first."""
    return -spec.width, -(spec.task.model.depth if spec.task is not None else 0)


def task_with_depth(task: Any, depth: int | None) -> Any:
    """``task`` with its model at ``depth`` and that depth's μP base shapes."""
    if depth is None or task.model.depth == depth:
        return task
    model = task.model.model_copy(update={"depth": int(depth)})
    return dataclasses.replace(task, model=model, base_shapes=None).with_base_shapes()


def task_at_depth(run: SweepRun, depth: int) -> Any:
    """``run.task`` at ``depth``, computed once per depth and kept in ``run.depth_tasks``."""
    if run.task.model.depth == depth:
        return run.task
    if depth not in run.depth_tasks:
        run.depth_tasks[depth] = task_with_depth(run.task, depth)
    return run.depth_tasks[depth]


def target_task(run: SweepRun) -> Any:
    """The task the target run trains with: the model at ``target.depth``."""
    return task_at_depth(run, run.config.target_depth)
