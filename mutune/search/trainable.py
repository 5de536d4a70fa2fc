"""The training loop every trial runs inside a Ray worker (proxies and the target alike).

One function, :func:`train_trial`, used through ``tune.with_parameters`` so the dataset travels
once through Ray's object store. Each evaluation reports, through ``ray.tune.report``:

    step          training steps done (the fidelity, DESIGN.md §4)
    val_loss      validation cross-entropy, nats
    train_loss    mean training loss since the previous report, nats
    productive_s  cumulative seconds inside training steps (forward, backward, update)
    eval_s        cumulative seconds inside evaluations
    setup_s       seconds spent building the model and optimizer
    samples       samples (MLP) or tokens (GPT) consumed so far
    n_params      parameter count of the model

A non-finite training loss is reported at once as a non-finite ``val_loss`` so the scheduler
stops the trial as diverged instead of training on garbage.
"""
from __future__ import annotations

import math
import time
from typing import Any

__all__ = ["train_trial"]


def train_trial(config: dict[str, Any], *, task: Any) -> None:
    """Train one trial and report after every ``task.train.eval_every`` steps and at the end.

    Args:
        config: Ray Tune's per-trial config: ``width`` (int), ``max_t`` (steps), ``threads``
            (torch intra-op threads), and ``point`` = {"hparams": {name: value},
            "seed": int, "index": int}.
        task: a :class:`mutune.proxies.task.ProxyTask`.
    Raises:
        ProxyError: the model cannot be built (reported by Ray as a failed trial).
    """
    import torch
    from ray import tune

    torch.set_num_threads(int(config.get("threads", 1)))
    t0 = time.perf_counter()
    point = config["point"]
    hparams, seed = point["hparams"], int(point["seed"])
    width, max_t = int(config["width"]), int(config["max_t"])
    eval_every = task.train.eval_every
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        model = task.build(width, hparams)
    opt = task.optimizer(model, float(hparams["lr"]))
    n_params = sum(p.numel() for p in model.parameters())
    setup_s = time.perf_counter() - t0
    productive_s = eval_s = 0.0
    loss_sum, loss_n = 0.0, 0
    for step in range(1, max_t + 1):
        x, y = task.batch(seed, step)
        ts = time.perf_counter()
        loss = task.loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        productive_s += time.perf_counter() - ts
        lv = float(loss.detach())
        loss_sum, loss_n = loss_sum + lv, loss_n + 1
        diverged = not math.isfinite(lv)
        if step % eval_every == 0 or step == max_t or diverged:
            te = time.perf_counter()
            val = float("nan") if diverged else task.val_loss(model)
            eval_s += time.perf_counter() - te
            tune.report({"step": step, "val_loss": val, "train_loss": loss_sum / loss_n,
                         "productive_s": productive_s, "eval_s": eval_s, "setup_s": setup_s,
                         "samples": step * task.samples_per_step, "n_params": n_params})
            loss_sum, loss_n = 0.0, 0
            if diverged:
                return
