"""The training loop every trial runs (proxies and the target alike), with checkpoint/resume.

:func:`run_training` is the loop; it knows nothing of Ray: it calls ``report(metrics,
checkpoint_dir)`` after every evaluation. :func:`train_trial` is the Ray Tune function trainable
around it (used through ``tune.with_parameters`` so the dataset travels once through Ray's object
store): reports go to ``ray.tune.report`` with a ``Checkpoint.from_directory`` when one was
written, and a restarted trial (``max_failures`` retry, or a promoted paused trial) resumes from
``ray.tune.get_checkpoint()``. Each report holds:

    step          training steps done (the fidelity, docs/architecture.md §4)
    val_loss      validation cross-entropy, nats (mean over the trial's replicates)
    val_loss_se   its standard error, nats (:meth:`~mutune.proxies.task.ProxyTask.evaluate`)
    test_loss, test_loss_se  test cross-entropy and its standard error, nats: only in the
                  report at max_t, when the data hold a test split (never seen by a scheduler)
    train_loss    mean training loss since the previous report, nats
    productive_s  cumulative seconds inside training steps (forward, backward, update)
    eval_s        cumulative seconds inside evaluations
    setup_s       seconds spent building the model and optimizer (this start)
    samples       samples (MLP) or tokens (GPT) consumed so far
    n_params      parameter count of the model
    checkpoint_s  cumulative seconds writing checkpoints (this start)
    gpu_util_mean, gpu_util_max, gpu_mem_max_bytes  NVML samples of a CUDA trial's devices
                  (:mod:`mutune.search.trial.gpu_monitor`); absent on CPU
    checkpoint_bytes  cumulative bytes of checkpoint state written along the trajectory
                  (a restart counts its checkpoint and the ones before it)
    restored_step the step the trial resumed from (0: a fresh start)
    restore_s     seconds spent loading the checkpoint (this start)
    wall_s        seconds since this start began (reporting and batch making included)
    node_id       the Ray node the trial runs on (under Ray only)
    worker_pid, began_at  the worker process and when (epoch seconds) the trial function
                  began on it (under Ray only; the trials one actor ran, in order)
    held_reports  under Ray, the reports held back before this one, oldest first
                  (:mod:`mutune.search.trial.report_hold`; ``decide_at`` and
                  ``report_hold_s`` in the config)

Checkpoints (:mod:`mutune.search.trial.checkpoint`, atomic) are written at report steps: at the
first report at or past each step in ``checkpoint_at`` (the scheduler's milestones: promotion
resumes from exactly where the trial paused), when ``checkpoint_every`` steps passed since the
last one (rounded up to the next report), and on SIGTERM (spot preemption: finish the current
step, save, exit cleanly). Batches are a pure function of (seed, step) and the checkpoint
carries the RNG state, so on CPU a resumed trial's reports are bit-identical to an
uninterrupted one's.

A non-finite training loss is reported at once as a non-finite ``val_loss`` so the scheduler
stops the trial as diverged instead of training on garbage.

Preemption (:mod:`mutune.search.trial.preemption`): a notice — SIGTERM to the worker (under
Ray, through the handler :class:`~mutune.search.trial.preemption.PreemptibleTrainable`
installs in the actor's main thread), a notice file or a polled notice URL — ends the loop
after the step in progress: it evaluates, checkpoints that step, and reports it with
``preempted`` = 1 (and ``at_eval``: whether the step was an evaluation step anyway). The
trainable then returns normally — no error, so Ray's ``max_failures`` is not consumed — and
the driver retries the trial from that checkpoint before any new trial
(:meth:`mutune.search.backends.ray_tune.callback.SweepBook.on_trial_complete`); a report
that exists only because of the preemption is not recorded, so the retried trial's reports
equal an uninterrupted one's. A hard kill (SIGKILL, the OOM killer) is a failure: Ray retries
it from the last checkpoint within ``ray.max_failures``.
"""
from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mutune.search.trial.preemption import NoticeWatcher as _NoticeWatcher
from mutune.search.trial.preemption import Preemption as _Preemption

__all__ = ["train_trial", "run_training"]


def run_training(config: dict[str, Any], task: Any, *,
                 report: Callable[[dict[str, Any], Path | None], None],
                 restore_dir: str | Path | None = None,
                 checkpoint_root: str | Path | None = None,
                 parallel: Any = None, scratch_checkpoints: bool = False) -> str:
    """Train one trial, reporting after every ``task.train.eval_every`` steps and at the end.

    Args:
        config: ``width`` (int), ``max_t`` (steps), ``threads`` (torch intra-op threads),
            ``gpus`` (> 0: CUDA with bf16 autocast), ``checkpoint_every`` (steps, 0: off; or
            ``"auto"`` with ``spot`` = ``cost.spot`` as a dict:
            :class:`~mutune.search.trial.cadence.Cadence`),
            ``checkpoint_at`` (steps, e.g. the rung milestones), ``keep_final`` (also
            checkpoint the trained model at ``max_t``: the target run), and ``point`` =
            {"hparams": {name: value}, "seed": int, "index": int, optional
            "replicate_seeds": [int, …] (replicates train in lockstep, the mean is reported),
            optional "width" (the trial's own width, in a run of several widths; default
            ``config["width"]``)}.
        task: a :class:`mutune.proxies.task.ProxyTask`, or group name → task (a run whose
            groups train different models): the point's ``"task"`` names its own.
        report: called with (metrics, checkpoint folder or None) after each evaluation.
        restore_dir: a checkpoint folder to resume from (None: a fresh start).
        checkpoint_root: where checkpoint folders are made (default: a temporary folder).
        scratch_checkpoints: True when ``report`` hands each checkpoint folder to Ray, which
            copies (or moves) it into its storage before ``report`` returns: the folder is a
            scratch copy, written without fsync and removed once reported
            (:func:`~mutune.search.trial.checkpoint.save_trial_state`, ``durable=False``).
        parallel: data parallelism across the workers of one run
            (:class:`mutune.search.backends.ray_train.DataParallel`: one model replica per
            worker, each step's batch split between them, gradients averaged; the leading
            worker evaluates and checkpoints and every worker reports the same metrics), or
            None for one process. With it, ``config["diverge_above"]`` ({step: value}) ends
            the run as diverged after an evaluation above that value by more than three
            standard errors (:func:`mutune.search.driver.types.beyond_limit`), and the run ends as
            ``"cancelled"`` when ``parallel.stop_requested()`` says so.
    Returns:
        ``"completed"`` (max_t reached), ``"diverged"``, ``"preempted"`` (a preemption
        notice: the last report carried a checkpoint at the step reached, ``preempted`` = 1)
        or, with ``parallel``, ``"cancelled"``. ``config["preemption"]``: the
        ``ray.preemption`` section (notice file and URL to poll), optional.
    Raises:
        ProxyError: the model cannot be built. SearchError: an unreadable checkpoint.
    """
    if isinstance(task, Mapping):      # one task per group (a run of several depths)
        task = task[config["point"]["task"]]
    if getattr(task, "loop", None) is not None:     # the user's own loop (a plugin)
        from mutune.search.trial.user_loop import run_user_loop

        return run_user_loop(config, task, report=report, restore_dir=restore_dir,
                             checkpoint_root=checkpoint_root, parallel=parallel)
    import torch

    from mutune.proxies.device import select_device
    from mutune.search.trial.checkpoint import load_trial_state, save_trial_state
    from mutune.search.driver.types import beyond_limit
    from mutune.search.trial.evaluation import evaluate_models, replicate_mean, replicate_se
    from mutune.search.trial.schedule import make_lr_schedule

    torch.set_num_threads(int(config.get("threads", 1)))
    dev = select_device(prefer_cuda=bool(config.get("gpus", 0)))
    t0 = time.perf_counter()
    point = config["point"]
    hparams = point["hparams"]
    task = task.for_point(hparams)      # the point's recipe knobs (betas, eps, clip, …)
    seeds = [int(s) for s in point.get("replicate_seeds") or [point["seed"]]]
    width, max_t = int(point.get("width") or config["width"]), int(config["max_t"])
    keep_final = bool(config.get("keep_final"))     # the target: its trained model is kept
    marks = sorted(int(m) for m in config.get("checkpoint_at") or ())
    eval_every = task.train.eval_every
    models, opts = [], []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            models.append(task.build(width, hparams).to(dev.device))
        opts.append(task.optimizer(models[-1], float(hparams["lr"])))
    # the schedule scales every μP group's own starting lr (None: constant, no warmup)
    scheds = [make_lr_schedule(opt, task.train, max_t) for opt in opts]
    clip = task.train.grad_clip
    micro = int(task.train.micro_batches)
    # what the steps run: each model, or its data-parallel wrapper (the optimizer, the
    # evaluation and the checkpoints use the model itself: the same parameter tensors)
    nets = [parallel.wrap(m) for m in models] if parallel is not None else models
    lead = parallel is None or parallel.lead
    limits = {int(k): float(v) for k, v in (config.get("diverge_above") or {}).items()}
    n_params = sum(p.numel() for p in models[0].parameters())
    setup_s = time.perf_counter() - t0
    start = 0
    productive_s = eval_s = checkpoint_s = restore_s = 0.0
    checkpoint_bytes = 0
    loss_sum, loss_n = 0.0, 0
    if restore_dir is not None:
        tr = time.perf_counter()
        state = load_trial_state(restore_dir)
        for model, opt, ms, os_ in zip(models, opts, state["models"], state["optimizers"]):
            model.load_state_dict(ms)
            opt.load_state_dict(os_)
        for sched, ss in zip(scheds, state.get("schedulers") or [None] * len(scheds)):
            if sched is not None and ss is not None:
                sched.load_state_dict(ss)
        torch.set_rng_state(state["rng_cpu"])
        if dev.kind == "cuda" and state.get("rng_cuda") is not None:
            torch.cuda.set_rng_state(state["rng_cuda"])
        start = int(state["step"])
        productive_s, eval_s = float(state["productive_s"]), float(state["eval_s"])
        loss_sum, loss_n = float(state["loss_sum"]), int(state["loss_n"])
        # bytes written along the kept trajectory: those before this checkpoint, and it
        checkpoint_bytes = int(state.get("checkpoint_bytes", 0)) + sum(
            f.stat().st_size for f in Path(restore_dir).iterdir() if f.is_file())
        restore_s = time.perf_counter() - tr
    from mutune.search.trial.cadence import Cadence

    # every N steps, or ``auto``: Young's interval from the measured checkpoint seconds
    cadence = Cadence(config.get("checkpoint_every"), start_step=start,
                      spot=config.get("spot"), max_share=config.get("checkpoint_max_share"),
                      final_step=max_t if keep_final else None)
    root = Path(checkpoint_root) if checkpoint_root else Path(tempfile.mkdtemp(
        prefix="mutune-ckpt-"))

    written_s = [0.0]     # the latest checkpoint's write seconds

    def save(step: int) -> Path:
        nonlocal checkpoint_s, checkpoint_bytes
        tc = time.perf_counter()
        folder = root / f"step_{step:09d}"
        written = save_trial_state(folder, {
            "step": step, "models": [m.state_dict() for m in models],
            "optimizers": [o.state_dict() for o in opts],
            "schedulers": [None if sc is None else sc.state_dict() for sc in scheds],
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state() if dev.kind == "cuda" else None,
            "productive_s": productive_s, "eval_s": eval_s, "loss_sum": loss_sum,
            "loss_n": loss_n, "checkpoint_bytes": checkpoint_bytes},
            durable=not scratch_checkpoints)
        written_s[0] = time.perf_counter() - tc
        checkpoint_s += written_s[0]
        checkpoint_bytes += written.stat().st_size
        return folder

    from mutune.search.trial.gpu_monitor import GpuMonitor

    # CUDA trials sample NVML utilization and memory while they train (None on CPU)
    monitor = GpuMonitor.for_visible_devices() if dev.kind == "cuda" else None
    with _Preemption() as preempt, _NoticeWatcher(config.get("preemption")), \
            contextlib.ExitStack() as stack:
        # however the loop ends, a notice it saw is spent (the next trial here starts clean)
        stack.callback(lambda: preempt.consume() if preempt.requested else None)
        if monitor is not None:
            stack.callback(monitor.stop)
        for step in range(start + 1, max_t + 1):
            diverged = False
            for seed, net, model, opt, sched in zip(seeds, nets, models, opts, scheds):
                x, y = task.batch(seed, step)
                if parallel is not None:        # this worker's share of the step's batch
                    x, y = parallel.shard(x, y)
                ts = time.perf_counter()
                x, y = x.to(dev.device, non_blocking=True), y.to(dev.device, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                loss = _accumulate(task, net, x, y, micro, dev)
                if clip is not None:            # the global L2 norm of every gradient
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                opt.step()
                if sched is not None:
                    sched.step()
                if dev.kind == "cuda":
                    torch.cuda.synchronize()
                productive_s += time.perf_counter() - ts
                lv = float(loss)
                loss_sum, loss_n = loss_sum + lv, loss_n + 1
                diverged = diverged or not math.isfinite(lv)
            stop_now = preempt.requested
            if parallel is not None:     # every worker takes the same branch
                diverged, stop_now = parallel.any(diverged, stop_now)
            at_eval = step % eval_every == 0 or step == max_t or diverged
            if not (at_eval or stop_now):
                continue
            te = time.perf_counter()
            final = step == max_t and not diverged
            vals, tests = [(float("nan"), float("nan"))], []
            if not diverged:     # every worker agrees (above); each evaluates its part
                vals, tests = evaluate_models(task, models, dev, parallel,
                                              test=final and task.has_split("test"))
            eval_s += time.perf_counter() - te
            metrics = {"step": step, "val_loss": replicate_mean(vals),
                       "val_loss_se": replicate_se(vals),
                       "train_loss": loss_sum / loss_n, "productive_s": productive_s,
                       "eval_s": eval_s, "setup_s": setup_s,
                       "samples": step * task.samples_per_step * len(seeds),
                       "n_params": n_params, "replicates": len(seeds),
                       "restored_step": start, "restore_s": restore_s,
                       "wall_s": time.perf_counter() - t0}
            if tests:     # the test split: only at max_t, only reported
                metrics["test_loss"] = replicate_mean(tests)
                metrics["test_loss_se"] = replicate_se(tests)
            if stop_now and step < max_t:     # the driver retries it from this checkpoint
                metrics["preempted"], metrics["at_eval"] = 1.0, float(at_eval)
            if at_eval:   # a preemption report between evaluations keeps the running mean
                loss_sum, loss_n = 0.0, 0
            if step in limits and beyond_limit(metrics["val_loss"], metrics["val_loss_se"],
                                               limits[step]):
                diverged = True      # worse than the run's divergence limit at this step
            folder = None
            if not diverged and ((final and keep_final) or step < max_t and (
                    stop_now or cadence.due(step)
                    or any(cadence.last_step < m <= step for m in marks))):
                folder = save(step) if lead else None
                cadence.last_step = step        # every worker (only the lead writes)
            metrics["checkpoint_s"] = checkpoint_s
            metrics["checkpoints"] = float(cadence.n + (folder is not None))
            metrics["checkpoint_bytes"] = float(checkpoint_bytes)
            if monitor is not None:
                metrics.update(monitor.figures())
            tr = time.perf_counter()
            report(metrics, folder)
            if folder is not None:
                # the cadence weighs what the checkpoint held the devices for: the write and
                # the report that hands it to Ray (which copies it into its storage first)
                cadence.wrote(step, written_s[0] + time.perf_counter() - tr)
                if scratch_checkpoints:     # Ray holds its copy now
                    shutil.rmtree(folder, ignore_errors=True)
            if diverged:
                return "diverged"
            if stop_now and step < max_t:
                return "preempted"
            if parallel is not None and step < max_t and parallel.stop_requested():
                return "cancelled"
    return "completed"


def _accumulate(task: Any, net: Any, x: Any, y: Any, micro: int, dev: Any) -> Any:
    """Forward and backward over ``x, y`` in ``micro`` equal micro-batches, each loss weighted
    by its share, so the accumulated gradient is the whole batch's mean-loss gradient (to
    float rounding). Under DDP the gradients are all-reduced once, on the last micro-batch
    (``no_sync`` before it). Returns the batch's loss (a detached scalar tensor)."""
    import torch

    if micro == 1:
        with dev.compute():
            loss = task.step_loss(net, x, y)
        loss.backward()
        return loss.detach()
    total = torch.zeros((), device=x.device)
    parts = list(zip(torch.chunk(x, micro), torch.chunk(y, micro)))
    for i, (xc, yc) in enumerate(parts):
        sync = i == len(parts) - 1 or not hasattr(net, "no_sync")
        with contextlib.nullcontext() if sync else net.no_sync():
            with dev.compute():
                part = task.step_loss(net, xc, yc) * (len(xc) / len(x))
            part.backward()
        total += part.detach().float()
    return total


def train_trial(config: dict[str, Any], *, task: Any) -> None:
    """Ray Tune function trainable: :func:`run_training` with reports to ``tune.report``,
    checkpoints as ``ray.tune.Checkpoint`` folders, and resume from ``tune.get_checkpoint()``
    (a retry or a promotion) or, for a trial of an interrupted sweep continued by
    ``mutune resume``, from ``point["restore_from"]``.

    What the trial prints and the traceback of an error go to ``config["log_dir"]`` for the
    driver to record (:mod:`mutune.search.trial.logs`).

    Args:
        config: as :func:`run_training`.
        task: a :class:`mutune.proxies.task.ProxyTask`.
    A preempted trial returns normally after its checkpointed report (the driver retries
    it; see the module docstring).

    Raises:
        ProxyError: the model cannot be built (reported by Ray as a failed trial).
    """
    from ray import tune

    import ray

    from mutune.search.trial.logs import capture
    from mutune.search.trial.remote_trial import RemoteTier, restore_dir_for
    from mutune.search.trial.report_hold import ReportHold

    began_at = time.time()      # the function's start on its worker (epoch seconds)
    node = ray.get_runtime_context().get_node_id()
    ray_id = str(tune.get_context().get_trial_id() or "")
    key = str(config["point"].get("key") or ray_id or "trial")
    remote = RemoteTier.for_trial(config, key, ray_id)
    # reports no decision waits for travel with the next one (report_hold.py)
    hold = ReportHold(config.get("decide_at") or (), float(config.get("report_hold_s") or 0))

    def report(metrics: dict[str, Any], folder: Path | None) -> None:
        metrics["node_id"] = node
        metrics["worker_pid"], metrics["began_at"] = os.getpid(), began_at
        if remote is not None:      # background upload; Ray keeps only the final one
            remote.checkpointed(metrics, folder)
            folder = remote.for_ray(folder, int(metrics["step"]))
        if not hold.hold(metrics, folder is not None):
            send(hold.sending(metrics), folder)

    def send(metrics: dict[str, Any], folder: Path | None = None) -> None:
        log.save()   # before the report: a trial stopped at this report has its output
        tune.report(metrics, checkpoint=None if folder is None
                    else tune.Checkpoint.from_directory(str(folder)))

    with capture(config.get("log_dir"), key,
                 upload=remote.upload_log if remote is not None else None) as log, \
            tempfile.TemporaryDirectory(prefix="mutune-ckpt-") as tmp, \
            contextlib.ExitStack() as stack:
        root = str(remote.cache_dir) if remote is not None else tmp
        restore_dir = restore_dir_for(tune.get_checkpoint(), config["point"], remote, tmp, stack)
        try:
            # without the remote tier the folders are scratch copies of what Ray keeps
            status = run_training(config, task, report=report, restore_dir=restore_dir,
                                  checkpoint_root=root, scratch_checkpoints=remote is None)
        except BaseException as exc:
            if remote is not None:      # a retry here may restore from the cache
                remote.close(finished=False)
            if isinstance(exc, Exception) and hold.held:   # what it held is recorded first
                send(hold.flush())
            raise
        if hold.held:    # a loop that returned between decisions (a plugin's early end)
            send(hold.flush())
        if remote is not None:   # no rung pauses it (stopping variant), or it reached max_t
            remote.close(finished=status == "completed" or not remote.stop_at)
    del status      # how it ended is in its reports (a preemption's carries preempted = 1)
