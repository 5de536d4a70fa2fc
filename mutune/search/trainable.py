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

    What the trial prints and the traceback of an error go to ``config["log_dir"]`` for the
    driver to record (:mod:`mutune.search.trial_log`).

    Args:
        config: Ray Tune's per-trial config: ``width`` (int), ``max_t`` (steps), ``threads``
            (torch intra-op threads), ``gpus`` (GPUs granted: > 0 trains on CUDA with bf16
            autocast and flash attention), and ``point`` = {"hparams": {name: value},
            "seed": int, "index": int, optional "replicate_seeds": [int, …]}. With
            replicate seeds the trial trains one model per seed in lockstep (same
            hyperparameters) and reports their mean validation loss — replicates that average
            out seed noise without paying a trial's start-up cost per seed.
        task: a :class:`mutune.proxies.task.ProxyTask`.
    Raises:
        ProxyError: the model cannot be built (reported by Ray as a failed trial).
    """
    from ray import tune

    from mutune.search.trial_log import capture

    with capture(config.get("log_dir"), tune.get_context().get_trial_id() or "trial") as log:
        _train(config, task, log.save)


def _train(config: dict[str, Any], task: Any, save_log: Any) -> None:
    import torch
    from ray import tune

    from mutune.proxies.device import select_device

    torch.set_num_threads(int(config.get("threads", 1)))
    dev = select_device(prefer_cuda=bool(config.get("gpus", 0)))
    t0 = time.perf_counter()
    point = config["point"]
    hparams = point["hparams"]
    seeds = [int(s) for s in point.get("replicate_seeds") or [point["seed"]]]
    width, max_t = int(config["width"]), int(config["max_t"])
    eval_every = task.train.eval_every
    models, opts = [], []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            models.append(task.build(width, hparams).to(dev.device))
        opts.append(task.optimizer(models[-1], float(hparams["lr"])))
    n_params = sum(p.numel() for p in models[0].parameters())
    setup_s = time.perf_counter() - t0
    productive_s = eval_s = 0.0
    loss_sum, loss_n = 0.0, 0
    for step in range(1, max_t + 1):
        diverged = False
        for seed, model, opt in zip(seeds, models, opts):
            x, y = task.batch(seed, step)
            ts = time.perf_counter()
            x, y = x.to(dev.device, non_blocking=True), y.to(dev.device, non_blocking=True)
            with dev.compute():
                loss = task.step_loss(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if dev.kind == "cuda":
                torch.cuda.synchronize()
            productive_s += time.perf_counter() - ts
            lv = float(loss.detach())
            loss_sum, loss_n = loss_sum + lv, loss_n + 1
            diverged = diverged or not math.isfinite(lv)
        if step % eval_every == 0 or step == max_t or diverged:
            te = time.perf_counter()
            with dev.compute():
                vals = ([float("nan")] if diverged else
                        [task.val_loss(model) for model in models])
            eval_s += time.perf_counter() - te
            save_log()   # before the report: a trial stopped at this report has its output
            tune.report({"step": step, "val_loss": sum(vals) / len(vals),
                         "train_loss": loss_sum / loss_n, "productive_s": productive_s,
                         "eval_s": eval_s, "setup_s": setup_s,
                         "samples": step * task.samples_per_step * len(seeds),
                         "n_params": n_params, "replicates": len(seeds)})
            loss_sum, loss_n = 0.0, 0
            if diverged:
                return
