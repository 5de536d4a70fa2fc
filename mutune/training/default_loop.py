"""mutune's own training loop: what every trial runs unless ``train.loop`` names a plugin."""
from __future__ import annotations

import contextlib
import math
from typing import Any

__all__ = ["train_steps"]


def train_steps(ctx: Any) -> None:
    """Train ``ctx``'s models from ``ctx.start_step + 1`` to ``ctx.max_t``, reporting each
    evaluation.

    Raises:
        LoopEnd: through :meth:`~mutune.training.context.LoopContext.report`, when a report
            ends the run (diverged, preempted, cancelled)."""
    restored = ctx.get_checkpoint()
    state = (restored or {}).get("state") or {}
    loss_sum, loss_n = float(state.get("loss_sum", 0.0)), int(state.get("loss_n", 0))
    for step in ctx.steps():
        diverged = False
        for i, seed in enumerate(ctx.seeds):
            loss = _train_step(ctx, i, *ctx.batch(step, seed))
            loss_sum, loss_n = loss_sum + loss, loss_n + 1
            diverged = diverged or not math.isfinite(loss)
        stop_now, diverged = ctx.stop_requested(diverged)   # every worker takes one branch
        at_eval = ctx.is_eval_step(step) or diverged
        if not (at_eval or stop_now):
            continue
        metrics = _evaluation(ctx, step, diverged=diverged)
        metrics["train_loss"] = loss_sum / loss_n
        if stop_now and step < ctx.max_t:     # the driver retries it from this checkpoint
            metrics["preempted"], metrics["at_eval"] = 1.0, float(at_eval)
        if at_eval:   # a preemption report between evaluations keeps the running mean
            loss_sum, loss_n = 0.0, 0
        ctx.report(metrics, state={"loss_sum": loss_sum, "loss_n": loss_n})


def _train_step(ctx: Any, i: int, x: Any, y: Any) -> float:
    """One optimizer step of replicate ``i`` on (x, y); returns its training loss."""
    import torch

    model, opt, sched = ctx.models[i], ctx.optimizers[i], ctx.schedulers[i]
    opt.zero_grad(set_to_none=True)
    loss = _accumulate(ctx, ctx.nets[i], x, y, int(ctx.train.micro_batches))
    if ctx.train.grad_clip is not None:      # the global L2 norm of every gradient
        torch.nn.utils.clip_grad_norm_(model.parameters(), ctx.train.grad_clip)
    opt.step()
    if sched is not None:
        sched.step()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize()
    return float(loss)


def _evaluation(ctx: Any, step: int, *, diverged: bool) -> dict[str, Any]:
    """The report's losses at ``step``: replicates' validation mean and se, test at ``max_t``."""
    from mutune.training.evaluation import replicate_mean, replicate_se

    final = step == ctx.max_t and not diverged
    vals, tests = [(math.nan, math.nan)], []
    if not diverged:     # every worker agrees (stop_requested); each evaluates its part
        vals, tests = ctx.evaluate_replicates(
            test=final and ctx.test_at_end and ctx.has_split("test"))
    metrics: dict[str, Any] = {"step": step, "val_loss": replicate_mean(vals),
                               "val_loss_se": replicate_se(vals)}
    if tests:     # the test split: only at max_t, only reported
        metrics["test_loss"] = replicate_mean(tests)
        metrics["test_loss_se"] = replicate_se(tests)
    return metrics


def _accumulate(ctx: Any, net: Any, x: Any, y: Any, micro: int) -> Any:
    """Forward and backward over ``micro`` equal micro-batches, each loss weighted by its share."""
    import torch

    if micro == 1:
        loss = ctx.step_loss(net, x, y)
        loss.backward()
        return loss.detach()
    total = torch.zeros((), device=x.device)
    parts = list(zip(torch.chunk(x, micro), torch.chunk(y, micro)))
    for i, (xc, yc) in enumerate(parts):
        sync = i == len(parts) - 1 or not hasattr(net, "no_sync")
        with contextlib.nullcontext() if sync else net.no_sync():
            part = ctx.step_loss(net, xc, yc) * (len(xc) / len(x))
            part.backward()
        total += part.detach().float()
    return total
