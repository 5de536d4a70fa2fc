"""The dry run's timed warm-up: a few real training steps and one evaluation of one width, on
the device a trial gets and with its numerics."""
from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["warmup"]


def warmup(task: Any, width: int, hparams: dict[str, float], steps: int,
           threads: int, dev: Any = None) -> dict[str, float]:
    """Seconds to build (``setup_s``), per training step (``s_per_step``, median of steps 2…) and
    per evaluation (``s_per_eval``), and ``warmup_s``, on ``dev`` (None: the CPU).

    Raises:
        ProxyError: the model cannot be built. SearchError: a plugin breaks the loop's contract,
            or the warm-up was interrupted."""
    import torch

    from mutune.errors import SearchError
    from mutune.training.run import run_loop

    reports: list[dict[str, Any]] = []
    times: list[float] = []
    cuda = dev is not None and dev.kind == "cuda"
    cfg = {"width": width, "max_t": int(steps), "threads": threads, "gpus": int(cuda),
           "test_at_max_t": False, "point": {"hparams": dict(hparams), "seed": 0, "index": 0}}
    old = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[]):
            status = run_loop(cfg, task, report=lambda m, _folder: reports.append(m),
                              step_times=times)
    finally:
        torch.set_num_threads(old)
    if cuda:
        torch.cuda.empty_cache()
    if status == "preempted":
        raise SearchError(f"the warm-up of width {width} was interrupted after "
                          f"{len(times)} step(s) (SIGTERM or a preemption notice)")
    last = reports[-1]
    return {"setup_s": float(last["setup_s"]),
            "s_per_step": statistics.median(times[1:] if len(times) > 1 else times),
            "s_per_eval": float(last["eval_s"]) / max(len(reports), 1),
            "warmup_s": time.perf_counter() - t0}
