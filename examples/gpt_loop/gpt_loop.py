"""A user's own training loop for mutune: the recipe of a small GPT pre-training run.

Linear warmup over the first 10 % of the run, then cosine decay to 10 % of the peak; gradient
clipping at global norm 1; the training loss averaged between evaluations and carried through
checkpoints. The function does its own forward, backward and optimizer step; mutune hands it
the μP model and optimizer, the batches, the evaluation, ``report`` and ``get_checkpoint``
(a ``mutune.LoopContext``), and does the rest: base shapes, μP scaling of every parameter
group's learning rate, rungs, checkpoints, preemption and the GPU-hours ledger. The same
function trains every proxy trial and the full-size run, each over its own ``ctx.max_t`` steps.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

WARMUP_FRACTION = 0.1    # of each run's steps
MIN_LR_RATIO = 0.1       # the cosine's floor, × each group's peak learning rate
CLIP_NORM = 1.0          # global L2 norm of the gradients


def lr_factor(step: int, total: int) -> float:
    """Warmup then cosine (Loshchilov & Hutter 2017), as a factor on the peak rate; step is
    1-based, the last step of the run gets MIN_LR_RATIO."""
    warmup = max(1, round(WARMUP_FRACTION * total))
    if step <= warmup:
        return step / warmup
    progress = (step - warmup) / max(total - warmup, 1)
    return MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress))


def train(ctx) -> None:
    """mutune's training-loop plugin ``warmup_cosine``: see the module docstring."""
    model, opt = ctx.model, ctx.optimizer
    resumed = ctx.get_checkpoint()
    state = resumed["state"] if resumed and resumed["state"] else {"loss_sum": 0.0, "n": 0}
    loss_sum, n = float(state["loss_sum"]), int(state["n"])
    model.train()
    for step in ctx.steps():
        ctx.set_lr_factor(lr_factor(step, ctx.max_t))     # relative to μP's per-group rates
        x, y = ctx.batch(step)
        logits = ctx.net(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum, n = loss_sum + loss.item(), n + 1
        if ctx.is_eval_step(step):
            val, val_se = ctx.evaluate("val")
            metrics = {"step": step, "val_loss": val, "val_loss_se": val_se,
                       "train_loss": loss_sum / n,
                       "lr_factor": lr_factor(step, ctx.max_t)}
            if step == ctx.max_t and ctx.has_split("test"):
                metrics["test_loss"], metrics["test_loss_se"] = ctx.evaluate("test")
            loss_sum, n = 0.0, 0
            ctx.report(metrics, state={"loss_sum": loss_sum, "n": n})
