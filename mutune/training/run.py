"""One trial's training run, whichever loop trains it: :func:`run_loop`.

The run builds the trial's :class:`~mutune.training.session.TrialSession` (μP models,
optimizers, schedules; restored from a checkpoint when resumed), hands a
:class:`~mutune.training.context.LoopContext` to the loop — mutune's
(:func:`mutune.training.default_loop.train_steps`) or the plugin ``train.loop`` names — and
turns each of its reports into one for the driver. It knows nothing of Ray: the caller's
``report(metrics, checkpoint_dir)`` gets every evaluation
(:func:`mutune.search.trial.trainable.train_trial` sends them to Ray Tune,
:mod:`mutune.search.backends.ray_train` to Ray Train).

Each report holds the loop's figures and the ledger's (:data:`~mutune.training.session.
LEDGER_KEYS`): ``productive_s`` (cumulative seconds inside the loop's own steps), ``eval_s``
(inside evaluations), ``setup_s`` (building model and optimizer, this start), ``samples``
(samples or tokens consumed), ``n_params``, ``replicates``, ``restored_step`` (0: a fresh
start), ``restore_s``, ``wall_s`` (since this start), ``checkpoint_s``, ``checkpoints``,
``checkpoint_bytes`` (written along the kept trajectory) and, on CUDA, ``gpu_util_mean``,
``gpu_util_max``, ``gpu_mem_max_bytes`` (:mod:`mutune.search.trial.gpu_monitor`).

Checkpoints (:mod:`mutune.search.trial.checkpoint`, atomic) are written at report steps: at the
first report at or past each step in ``checkpoint_at`` (the scheduler's milestones: promotion
resumes from exactly where the trial paused), when ``checkpoint_every`` steps passed since the
last one (rounded up to the next report), at a preemption notice, and at ``max_t`` for the
target (``keep_final``). Batches are a pure function of (seed, step) and the checkpoint carries
the RNG state, so on CPU a resumed trial's reports are bit-identical to an uninterrupted one's.

Preemption (:mod:`mutune.search.trial.preemption`): a notice — SIGTERM to the worker, a notice
file or a polled notice URL — ends the loop after the step in progress; the step is evaluated,
checkpointed and reported with ``preempted`` = 1, and the run returns ``"preempted"`` (no error:
Ray's ``max_failures`` is not consumed; the driver retries the trial from that checkpoint, and a
report that exists only because of the preemption is not recorded). A hard kill (SIGKILL, the
OOM killer) is a failure: Ray retries it from the last checkpoint within ``ray.max_failures``.
"""
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

    Args:
        config: the trial's :class:`~mutune.training.spec.TrialSpec`, or the worker's
            config dict it is read from (:meth:`~mutune.training.spec.TrialSpec.from_config`).
        task: a :class:`mutune.proxies.task.ProxyTask`, or task name → task (a run whose
            groups train different models): the point's ``"task"`` names its own. Its
            ``loop``, when set, is the training-loop plugin that trains it.
        report: called with (metrics, checkpoint folder or None) after each evaluation.
        restore_dir: a checkpoint folder to resume from (None: a fresh start).
        checkpoint_root: where checkpoint folders are made (default: a temporary folder).
        parallel: data parallelism across the workers of one run
            (:class:`mutune.search.backends.ray_train.DataParallel`), or None for one
            process; with it the run ends as ``"cancelled"`` when
            ``parallel.stop_requested()`` says so.
        scratch_checkpoints: True when ``report`` hands each checkpoint folder to Ray, which
            copies (or moves) it into its storage before ``report`` returns: the folder is
            written without fsync and removed once reported.
        step_times: where the seconds of each step trained are appended (a warm-up's).
    Returns:
        ``"completed"`` (max_t reached), ``"diverged"``, ``"preempted"`` or ``"cancelled"``.
    Raises:
        ProxyError: the model cannot be built.
        SearchError: a config the spec cannot be read from; an unreadable checkpoint; a
            plugin asked for lockstep replicates, reports out of order or without the
            sweep's metric, or returns before ``max_t``.
            Whatever a plugin raises propagates (the trial fails with its traceback).
    """
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

