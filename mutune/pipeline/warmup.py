"""The dry run's timed warm-up: a few real training steps and one evaluation of one width,
on the device a trial gets and with its numerics (:mod:`mutune.pipeline.dry_run` prices a
sweep from them)."""
from __future__ import annotations

import time
from typing import Any

__all__ = ["warmup", "warmup_user_loop"]


def warmup(task: Any, width: int, hparams: dict[str, float], steps: int,
            threads: int, dev: Any = None) -> dict[str, float]:
    """Seconds to build the model and optimizer, per training step (median of steps 2…) and
    per evaluation, measured on ``task`` at ``width`` on ``dev``
    (:class:`~mutune.proxies.device.TrainDevice`; None: the CPU) under its numerics."""
    import statistics

    import torch

    from mutune.proxies.device import select_device

    dev = dev if dev is not None else select_device(prefer_cuda=False)
    if getattr(task, "loop", None) is not None:
        return warmup_user_loop(task, width, hparams, steps, threads, dev)
    cuda = dev.kind == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            t0 = time.perf_counter()
            model = task.build(width, hparams).to(dev.device)
            opt = task.for_point(hparams).optimizer(model, float(hparams["lr"]))
            sync()
            setup = time.perf_counter() - t0
            times = []
            for step in range(1, steps + 1):
                x, y = task.batch(0, step)
                ts = time.perf_counter()
                x, y = x.to(dev.device), y.to(dev.device)
                with dev.compute():
                    loss = task.step_loss(model, x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sync()
                times.append(time.perf_counter() - ts)
            te = time.perf_counter()
            with dev.compute():
                task.val_loss(model)
            sync()
            s_eval = time.perf_counter() - te
        del model, opt
        if cuda:
            torch.cuda.empty_cache()
    finally:
        torch.set_num_threads(old)
    s_step = statistics.median(times[1:] if len(times) > 1 else times)
    return {"setup_s": setup, "s_per_step": s_step, "s_per_eval": s_eval,
            "warmup_s": setup + sum(times) + s_eval}


def warmup_user_loop(task: Any, width: int, hparams: dict[str, float], steps: int,
                      threads: int, dev: Any) -> dict[str, float]:
    """:func:`warmup` for a training-loop plugin: the user's own loop runs ``steps`` steps
    (its one report, at the last step, holds its evaluation), so the plan prices the user's
    step — their loss, clipping, schedule — not mutune's. Seconds per step are the loop's
    productive seconds over its steps (the first step's warm-up included)."""
    import torch

    from mutune.search.trial.user_loop import run_user_loop

    reports: list[dict[str, Any]] = []
    old = torch.get_num_threads()
    cfg = {"width": width, "max_t": int(steps), "threads": threads,
           "gpus": 1 if dev.kind == "cuda" else 0,
           "point": {"hparams": dict(hparams), "seed": 0, "index": 0}}
    t0 = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[]):
            run_user_loop(cfg, task, report=lambda m, _folder: reports.append(m))
    finally:
        torch.set_num_threads(old)
    wall = time.perf_counter() - t0
    last = reports[-1]
    return {"setup_s": float(last["setup_s"]),
            "s_per_step": float(last["productive_s"]) / max(int(steps), 1),
            "s_per_eval": float(last["eval_s"]) / max(len(reports), 1), "warmup_s": wall}
