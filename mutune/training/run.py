"""One trial's training run, whichever loop trains it: :func:`run_loop`."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mutune.errors import SearchError
from mutune.training.spec import TrialSpec

__all__ = ["run_loop"]


def run_loop(config: Mapping[str, Any] | TrialSpec, task: Any, *,
             report: Callable[[dict[str, Any], Path | None], None],
             restore_dir: str | Path | None = None,
             checkpoint_root: str | Path | None = None,
             parallel: Any = None, scratch_checkpoints: bool = False,
             step_times: list[float] | None = None) -> str:
    """Train one trial, reporting after every ``task.train.eval_every`` steps and at the end.

    Raises:
        ProxyError: the model cannot be built.
        SearchError: a config the spec cannot be read from; an unreadable checkpoint; a
            plugin asked for lockstep replicates, reports out of order or without the
            sweep's metric, or returns before ``max_t``.
            Whatever a plugin raises propagates (the trial fails with its traceback)."""
    from mutune.search.trial.gpu_monitor import GpuMonitor
    from mutune.search.trial.preemption import NoticeWatcher, Preemption
    from mutune.training.context import LoopContext, LoopEnd
    from mutune.training.default_loop import train_steps
    from mutune.training.session import TrialSession

    spec = config if isinstance(config, TrialSpec) else TrialSpec.from_config(config)
    if isinstance(task, Mapping):      # one task per group (a run of several depths)
        task = task[spec.point.task]
    loop = getattr(task, "loop", None)
    name = str(task.train.loop) if loop is not None else "mutune"
    if loop is not None and len(spec.point.seeds) > 1:
        raise SearchError(f"train.loop = {name!r} trains one model per trial; this trial asks "
                          f"for {len(spec.point.seeds)} replicate seeds in lockstep "
                          "(search.replicates or a transfer check's seeds): use 1")
    session = TrialSession(spec, task, parallel=parallel, checkpoint_root=checkpoint_root,
                           scratch_checkpoints=scratch_checkpoints)
    session.restore(restore_dir)
    # CUDA trials sample NVML utilization and memory while they train (None on CPU)
    monitor = GpuMonitor.for_visible_devices() if session.dev.kind == "cuda" else None

    def send(metrics: dict[str, Any], folder: Path | None) -> None:
        if monitor is not None:
            metrics.update(monitor.figures())
        report(metrics, folder)

    with Preemption() as preempt, NoticeWatcher(dict(spec.preemption or {})), \
            contextlib.ExitStack() as stack:
        # however the loop ends, a notice it saw is spent (the next trial here starts clean)
        stack.callback(lambda: preempt.consume() if preempt.requested else None)
        if monitor is not None:
            stack.callback(monitor.stop)
        ctx = LoopContext(session, report=send, notice=lambda: preempt.requested, name=name,
                          plugin=loop is not None)
        if step_times is not None:
            stack.callback(lambda: step_times.extend(ctx.step_s))
        try:
            (loop or train_steps)(ctx)
        except LoopEnd as end:
            return end.status
    if ctx.last_report < session.max_t:
        raise SearchError(f"train.loop = {name!r} returned after step {ctx.last_report} was "
                          f"reported; a run ends at max_t = {session.max_t} (iterate "
                          "ctx.steps() and report every evaluation step)")
    return "completed"

