"""A user's own training loop, run the way mutune runs its own (docs/architecture.md §5).

A training-loop plugin is a function ``loop(ctx) -> None`` registered in the entry-point group
``mutune.loops`` (:func:`mutune.proxies.plugins.load_loop`) and named by ``train.loop``. It is
written like a Ray Tune function trainable and uses Tune's names::

    def train(ctx):                            # ctx: LoopContext
        model, opt = ctx.model, ctx.optimizer  # μP-built, μP-scaled; restored when resumed
        for step in ctx.steps():               # start_step + 1 … max_t
            x, y = ctx.batch(step)             # on the trial's device (this worker's share)
            loss = my_loss(ctx.net(x), y)      # ctx.net: the model, or its DDP wrapper
            loss.backward()
            opt.step(); opt.zero_grad(set_to_none=True)
            ctx.set_lr_factor(my_schedule(step))     # relative to each group's own lr
            if ctx.is_eval_step(step):
                val, val_se = ctx.evaluate("val")
                ctx.report({"step": step, "val_loss": val, "val_loss_se": val_se,
                            "train_loss": float(loss)})

The user's function does its own forward, backward and optimizer step. mutune keeps what makes
the sweep a μTransfer sweep and its figures true: the model is built with the sweep's base
shapes and the optimizer is mup's (each parameter group's learning rate scaled by its width
multiplier); :meth:`LoopContext.report` goes to the scheduler (rungs judge exactly the reported
step, so reports must land on every evaluation step: multiples of ``train.eval_every`` and
``max_t``); checkpoints are written by mutune at the reports its rules pick (rung milestones,
``checkpoint_every``, the target's final model) and hold the model, the optimizer, mutune's
schedule, the RNG state and the plain ``state`` the loop passed to ``report``; a resumed,
retried or promoted trial's model and optimizer are restored before the function is called and
:meth:`LoopContext.get_checkpoint` returns ``{"step", "state"}``; a SIGTERM is noticed after the
step in progress (``ctx.steps()`` checkpoints and ends the run); the ledger's productive time is
the loop's own time less batch making, evaluations, reports and checkpoints.

The same function trains every proxy trial and the full-size run (on Ray Train workers the
context's ``net`` is the DDP wrapper and ``batch`` gives this worker's share; only the leading
worker evaluates and checkpoints, and every worker reports the leading worker's figures).

One model per trial: ``search.replicates`` above 1 (models trained in lockstep) is refused
with a user loop.
"""
from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mutune.errors import SearchError

__all__ = ["LoopContext", "run_user_loop"]


class _LoopEnd(BaseException):
    """Ends the user's function from inside ``report``/``steps`` (a BaseException, so a
    user's ``except Exception`` cannot swallow it); carries the run's status."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class LoopContext:
    """What a training-loop plugin receives (module docstring: the contract).

    Attributes:
        model: the μP model at ``width`` on ``device`` (unwrapped: its parameters are the
            optimizer's; evaluate and inspect it).
        net: what the forward pass runs: ``model``, or its DDP wrapper on Ray Train workers.
        optimizer: mup's optimizer (``train.optimizer``; betas, eps and weight decay from the
            config and the trial's point).
        scheduler: the config's schedule (``train.lr_schedule``, a ``LambdaLR`` scaling each
            group's own starting lr) or None for ``constant`` without warmup; step it once per
            update if the loop uses it.
        hparams: the trial's hyperparameters {name: value} (the searched point).
        data: the loaded dataset (:class:`~mutune.proxies.data.ClassificationData` with
            ``train_x``/``train_y``/``val_x``/``val_y``…, or a text/token dataset), for metrics
            of the loop's own (an accuracy, a perplexity).
        width: hidden width; ``max_t``: the run's last step; ``eval_every``: steps between
            evaluations; ``start_step``: the step a resumed run continues after (0: fresh);
            ``seed``: the trial's seed; ``device``: the ``torch.device`` trained on.
    """

    def __init__(self, *, model: Any, net: Any, optimizer: Any, scheduler: Any,
                 hparams: dict[str, float], width: int, max_t: int, eval_every: int,
                 start_step: int, seed: int, device: Any, task: Any, parallel: Any,
                 on_report: Callable[[dict[str, Any], Any], None],
                 stop_check: Callable[[], bool], on_stop: Callable[[int], None],
                 restored: dict[str, Any] | None, compute: Any) -> None:
        self.model, self.net, self.optimizer, self.scheduler = model, net, optimizer, scheduler
        self.hparams, self.width, self.max_t = dict(hparams), int(width), int(max_t)
        self.eval_every, self.start_step, self.seed = int(eval_every), int(start_step), seed
        self.device = device
        self.data = task.data
        self._task, self._parallel, self._compute = task, parallel, compute
        self._on_report, self._stop_check, self._on_stop = on_report, stop_check, on_stop
        self._restored = restored
        self.batch_s = self.eval_s = 0.0
        self.last_step = int(start_step)     # the last step ``steps()`` handed out

    # -- the loop's schedule ------------------------------------------------------------
    def steps(self) -> Iterator[int]:
        """The steps to train, ``start_step + 1`` … ``max_t``. After each step (when the
        loop asks for the next one) a pending SIGTERM ends the run: mutune evaluates,
        checkpoints the step just completed, reports it and stops (status ``preempted``)."""
        for step in range(self.start_step + 1, self.max_t + 1):
            if step > self.start_step + 1 and self._stop_check():
                self._on_stop(step - 1)
            self.last_step = step
            yield step

    def is_eval_step(self, step: int) -> bool:
        """Whether ``step`` must be reported: a multiple of ``eval_every``, or ``max_t``."""
        return step % self.eval_every == 0 or step == self.max_t

    # -- data and evaluation -------------------------------------------------------------
    def batch(self, step: int) -> tuple[Any, Any]:
        """Training batch number ``step`` of this trial's seed, on ``device``: a pure function
        of (seed, step) (the family's loader or mutune's sampler), so a resumed run sees the
        batches it would have seen; on Ray Train workers this worker's share of it.

        Returns:
            (x, y) tensors: (batch, d_in) and (batch,) for digits; (batch, seq_len) token ids
            and next-token targets for text and tokens.
        """
        t = time.perf_counter()
        x, y = self._task.batch(self.seed, step)
        if self._parallel is not None:
            x, y = self._parallel.shard(x, y)
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.batch_s += time.perf_counter() - t
        return x, y

    def evaluate(self, split: str = "val") -> tuple[float, float]:
        """The task's evaluation of ``model`` on ``split`` (``"val"`` or ``"test"``):
        (mean cross-entropy in nats, its standard error), as
        :meth:`mutune.proxies.task.ProxyTask.evaluate`. On Ray Train workers only the
        leading worker evaluates; every worker gets its figures (call it on every worker)."""
        t = time.perf_counter()
        value: tuple[float, float] = (math.nan, math.nan)
        if self._parallel is None or self._parallel.lead:
            with self._compute():
                value = self._task.evaluate(self.model, split)
        if self._parallel is not None:
            value = self._parallel.share(value)
        self.eval_s += time.perf_counter() - t
        return value

    def has_split(self, split: str) -> bool:
        """Whether the data hold ``split`` (``"val"`` always; ``"test"`` when loaded)."""
        return self._task.has_split(split)

    def set_lr_factor(self, factor: float) -> None:
        """Set every parameter group's learning rate to ``factor`` × its own starting rate
        (``initial_lr``, recorded when the optimizer was made), never one rate for all: μP's
        per-group ratios (Tensor Programs V, Table 3) hold at every step.

        Raises:
            ValueError: ``factor`` is not a finite number >= 0.
        """
        if not (math.isfinite(factor) and factor >= 0):
            raise ValueError(f"lr factor {factor!r}: must be a finite number >= 0")
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * factor

    # -- Tune's names --------------------------------------------------------------------
    def report(self, metrics: dict[str, Any], *, state: dict[str, Any] | None = None) -> None:
        """Report one evaluation (Ray Tune's ``report``): ``metrics`` must hold ``step`` (the
        next evaluation step: every multiple of ``eval_every`` and ``max_t``, in order) and
        the sweep's metric (``search.metric``); further numeric keys are kept with the
        report. ``state``: plain data (numbers, strings, tensors, lists, dicts) saved with the
        checkpoint if mutune writes one at this report, handed back by
        :meth:`get_checkpoint`. A non-finite metric ends the run as diverged, a cancelled
        target run ends here; the call then does not return.

        Raises:
            SearchError: a missing or out-of-order ``step``, or a missing metric.
        """
        self._on_report(dict(metrics), state)

    def get_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint this run resumed from (Ray Tune's ``get_checkpoint``): ``{"step":
        int, "state": the state passed to report}``, or None on a fresh start. The model,
        optimizer, mutune's schedule and the RNG state are already restored from it."""
        return None if self._restored is None else dict(self._restored)


def run_user_loop(config: dict[str, Any], task: Any, *,
                  report: Callable[[dict[str, Any], Path | None], None],
                  restore_dir: str | Path | None = None,
                  checkpoint_root: str | Path | None = None,
                  parallel: Any = None) -> str:
    """:func:`mutune.search.trial.trainable.run_training` for a task whose ``loop`` is a
    training-loop plugin: same arguments, same reports (the loop's metrics plus mutune's
    ledger figures: ``productive_s``, ``eval_s``, ``setup_s``, ``samples``, ``n_params``,
    ``checkpoint_s``, ``checkpoint_bytes``, ``restored_step``, ``restore_s``, ``wall_s``),
    same checkpoint rules and statuses.

    Raises:
        SearchError: ``point["replicate_seeds"]`` holds more than one seed; the loop reports
            out of order or without the metric; the loop returns before ``max_t``; an
            unreadable checkpoint. Whatever the user's function raises propagates (the trial
            fails and its traceback is recorded).
    """
    import torch

    from mutune.proxies.device import select_device
    from mutune.search.driver.types import beyond_limit
    from mutune.search.trial.checkpoint import load_trial_state, save_trial_state
    from mutune.search.trial.schedule import make_lr_schedule

    torch.set_num_threads(int(config.get("threads", 1)))
    dev = select_device(prefer_cuda=bool(config.get("gpus", 0)))
    t0 = time.perf_counter()
    point = config["point"]
    seeds = [int(s) for s in point.get("replicate_seeds") or [point["seed"]]]
    if len(seeds) > 1:
        raise SearchError(f"train.loop = {task.train.loop!r} trains one model per trial; "
                          f"this trial asks for {len(seeds)} replicate seeds in lockstep "
                          "(search.replicates or a transfer check's seeds): use 1")
    seed, hparams = seeds[0], point["hparams"]
    task = task.for_point(hparams)      # the point's recipe knobs (betas, eps, clip, …)
    width, max_t = int(point.get("width") or config["width"]), int(config["max_t"])
    keep_final = bool(config.get("keep_final"))
    marks = sorted(int(m) for m in config.get("checkpoint_at") or ())
    metric = str(config.get("metric") or "val_loss")
    eval_every = task.train.eval_every
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        model = task.build(width, hparams).to(dev.device)
    opt = task.optimizer(model, float(hparams["lr"]))
    for group in opt.param_groups:          # set_lr_factor's reference, schedule or not
        group.setdefault("initial_lr", group["lr"])
    sched = make_lr_schedule(opt, task.train, max_t)
    net = parallel.wrap(model) if parallel is not None else model
    lead = parallel is None or parallel.lead
    limits = {int(k): float(v) for k, v in (config.get("diverge_above") or {}).items()}
    n_params = sum(p.numel() for p in model.parameters())
    setup_s = time.perf_counter() - t0
    start, restore_s, done_s, checkpoint_bytes = 0, 0.0, 0.0, 0
    restored = None
    if restore_dir is not None:
        tr = time.perf_counter()
        state = load_trial_state(restore_dir)
        model.load_state_dict(state["models"][0])
        opt.load_state_dict(state["optimizers"][0])
        if sched is not None and (state.get("schedulers") or [None])[0] is not None:
            sched.load_state_dict(state["schedulers"][0])
        torch.set_rng_state(state["rng_cpu"])
        if dev.kind == "cuda" and state.get("rng_cuda") is not None:
            torch.cuda.set_rng_state(state["rng_cuda"])
        start = int(state["step"])
        done_s = float(state["productive_s"])
        prior_eval_s = float(state["eval_s"])
        checkpoint_bytes = int(state.get("checkpoint_bytes", 0)) + sum(
            f.stat().st_size for f in Path(restore_dir).iterdir() if f.is_file())
        restored = {"step": start, "state": state.get("loop_state")}
        restore_s = time.perf_counter() - tr
    else:
        prior_eval_s = 0.0
    roots = [Path(checkpoint_root)] if checkpoint_root else []
    from mutune.search.trial.cadence import Cadence

    cadence = Cadence(config.get("checkpoint_every"), start_step=start, spot=config.get("spot"),
                      max_share=config.get("checkpoint_max_share"),
                      final_step=max_t if keep_final else None)
    clock = {"loop_t0": 0.0, "held_s": 0.0, "checkpoint_s": 0.0, "last_ckpt": start,
             "last_report": start, "bytes": checkpoint_bytes, "last_value": math.nan}

    def productive() -> float:
        # the loop's own time: less batch making, evaluations, reports and checkpoints
        return done_s + (time.perf_counter() - clock["loop_t0"] - ctx.batch_s - ctx.eval_s
                         - clock["held_s"])

    def save(step: int, loop_state: Any) -> Path:
        tc = time.perf_counter()
        if not roots:                    # made on the first checkpoint only
            roots.append(Path(tempfile.mkdtemp(prefix="mutune-ckpt-")))
        folder = roots[0] / f"step_{step:09d}"
        written = save_trial_state(folder, {
            "step": step, "models": [model.state_dict()], "optimizers": [opt.state_dict()],
            "schedulers": [None if sched is None else sched.state_dict()],
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state() if dev.kind == "cuda" else None,
            "productive_s": productive(), "eval_s": prior_eval_s + ctx.eval_s,
            "loss_sum": 0.0, "loss_n": 0, "checkpoint_bytes": clock["bytes"],
            "loop_state": loop_state})
        took = time.perf_counter() - tc
        clock["checkpoint_s"] += took
        clock["bytes"] += written.stat().st_size
        cadence.wrote(step, took)
        return folder

    def emit(metrics: dict[str, Any], loop_state: Any, *, stop_now: bool = False) -> None:
        th = time.perf_counter()
        step = metrics["step"]
        own = sorted(k for k, v in metrics.items() if k != "step" and isinstance(v, (int, float))
                     and not isinstance(v, bool))
        value = metrics[metric]
        # a preemption report judges mutune's own evaluation (the loop's metric is stale)
        judged = metrics["val_loss"] if stop_now else value
        diverged = not (isinstance(judged, (int, float)) and math.isfinite(float(judged)))
        se = metrics.get(f"{metric}_se")
        if step in limits and not diverged and beyond_limit(
                float(value), float(se) if isinstance(se, (int, float)) else None, limits[step]):
            diverged = True          # worse than the run's divergence limit at this step
        final = step == max_t and not diverged
        folder = None
        if not diverged and ((final and keep_final) or step < max_t and (
                stop_now or cadence.due(step)
                or any(clock["last_ckpt"] < m <= step for m in marks))):
            folder = save(step, loop_state) if lead else None
            clock["last_ckpt"] = cadence.last_step = step
        metrics.update({
            "productive_s": productive(), "eval_s": prior_eval_s + ctx.eval_s,
            "setup_s": setup_s, "samples": step * task.samples_per_step, "n_params": n_params,
            "replicates": 1, "restored_step": start, "restore_s": restore_s,
            "wall_s": time.perf_counter() - t0, "checkpoint_s": clock["checkpoint_s"],
            "checkpoint_bytes": float(clock["bytes"]), "loop_keys": own})
        clock["last_report"] = step
        clock["last_value"] = value
        report(metrics, folder)
        clock["held_s"] += time.perf_counter() - th
        if diverged:
            raise _LoopEnd("diverged")
        if stop_now:
            raise _LoopEnd("preempted")
        if parallel is not None and step < max_t and parallel.stop_requested():
            raise _LoopEnd("cancelled")

    def on_report(metrics: dict[str, Any], loop_state: Any) -> None:
        last = clock["last_report"]
        due = min(last + eval_every - last % eval_every, max_t)
        step = metrics.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step != due:
            raise SearchError(
                f"train.loop = {task.train.loop!r} reported step {step!r}; the next report "
                f"is due at step {due} (every multiple of train.eval_every = {eval_every} "
                f"and max_t = {max_t}, in order: the scheduler's rungs judge exactly the "
                "reported step) — report when ctx.is_eval_step(step)")
        if metric not in metrics:
            raise SearchError(f"train.loop = {task.train.loop!r} reported {sorted(metrics)} "
                              f"at step {step}: the sweep's metric {metric!r} "
                              "(search.metric) is missing")
        emit(metrics, loop_state)

    def on_stop(step: int) -> None:        # SIGTERM: evaluate, checkpoint, report, end
        val, se = ctx.evaluate("val")
        # a metric of the loop's own keeps its last reported value (mutune cannot compute it)
        # ``preempted``: the driver retries the trial from this checkpoint; ``at_eval`` 0:
        # a report only the preemption made (an evaluation step was reported already)
        emit({"step": step, "val_loss": val, "val_loss_se": se, "preempted": 1.0,
              "at_eval": 0.0,
              **({} if metric == "val_loss" else {metric: clock["last_value"]})},
             None, stop_now=True)

    from mutune.search.trial.preemption import NoticeWatcher, Preemption

    with Preemption() as preempt, NoticeWatcher(config.get("preemption")):
        # under DDP every worker joins the all-reduce at every step (never short-circuited:
        # a worker that skipped it would leave the others waiting in the collective)
        stop_check = (lambda: parallel.any(preempt.requested)[0]) \
            if parallel is not None else (lambda: preempt.requested)
        ctx = LoopContext(model=model, net=net, optimizer=opt, scheduler=sched,
                          hparams=hparams, width=width, max_t=max_t, eval_every=eval_every,
                          start_step=start, seed=seed, device=dev.device, task=task,
                          parallel=parallel, on_report=on_report, stop_check=stop_check,
                          on_stop=on_stop, restored=restored, compute=dev.compute)
        clock["loop_t0"] = time.perf_counter()
        try:
            task.loop(ctx)
        except _LoopEnd as end:
            return end.status
        finally:
            if preempt.requested:       # spent: the next trial of this process starts clean
                preempt.consume()
    if clock["last_report"] < max_t:
        raise SearchError(f"train.loop = {task.train.loop!r} returned after step "
                          f"{clock['last_report']} was reported; a run ends at max_t = "
                          f"{max_t} (iterate ctx.steps() and report every evaluation step)")
    return "completed"
