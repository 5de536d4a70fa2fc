"""The GPU figures of issue 18 (point 6), measured without Ray on one CUDA device.

Two parts, each printed as one JSON line and appended to ``--out``:

* ``target`` — the config's GPT (default ``configs/gpt-text.yaml``) trained as mutune trains
  it: the model and μP base shapes from :class:`~mutune.proxies.task.ProxyTask`, its optimizer
  (MuAdam/MuAdamW), and the trainer's step (forward and loss under
  :meth:`~mutune.proxies.device.TrainDevice.compute` — bf16 autocast where the device computes
  bf16, the flash SDPA kernel on sm80+ — then backward and the optimizer step), at the largest
  width that fits the device for ``--tokens-per-step`` tokens a step (32,768 by default; the
  width is capped where the FFN activation, tokens × ffn_ratio·width elements, would reach
  2^31: at 2.95e9 such elements PyTorch 2.11's CUDA step read out of bounds on an H200,
  32-bit indexing the likely cause). Three probe widths fit
  the peak memory (bytes per parameter, activations linear in width, a constant:
  :func:`pick_width`); the widest multiple of ``--width-step`` predicted under
  ``--memory-fraction`` of the device is trained, falling back one step at a time on an
  out-of-memory error. The model is built on the device (the trainer
  builds on the CPU and moves it; same weights, faster for billions of parameters).
  MFU = C / (step_s × peak), C = tokens × (6·N + 6·n_layer·n_ctx·d_model) per step (Kaplan et
  al. 2020, §2.1), peak from the cost table for the device's kind (``h200``: 989 TFLOP/s dense
  bf16, the vendor's datasheet; docs/architecture.md §6). Keys: ``device``, ``device_kind``,
  ``width``, ``depth``, ``n_params``, ``tokens_per_step``, ``steps``, ``ms_per_step`` (median
  of the timed steps, batch fetch included) with ``ms_per_step_range``, ``mfu``,
  ``tflops_per_s``, ``max_memory_gib``, ``first_loss``, ``last_loss``, ``finite``, ``probes``
  (GiB at each probe width), ``memory_fit`` (α, β, γ) and ``width_cap``.
* ``proxies`` — ``--proxies`` proxy trainings (the config's widest proxy width and batch) as
  concurrent processes on the one device, against one alone. Each process warms up, waits at
  a barrier, then trains ``--proxy-steps`` timed steps. Keys: ``alone_samples_per_s``,
  ``total_samples_per_s`` (Σ samples / the span from the barrier to the last finish),
  ``speedup`` (total / alone), ``per_process_samples_per_s`` (median, range), and NVML's
  utilization (percent of sample periods with a kernel running, sampled every 0.1 s over each
  timed span: ``nvml_util_alone_pct``, ``nvml_util_pct`` mean and max). A sample is a token
  for the GPT (:attr:`ProxyTask.samples_per_step`).

Without CUDA it prints ``{"benchmark": "gpu_check", "skipped": "no CUDA"}`` and exits 0;
``--cpu-smoke`` runs both parts on the CPU at tiny sizes instead (the test of this path).
Needs torch, numpy, PyYAML and nvidia-ml-py, plus mutune installed (its model families are
entry points, so a source tree on ``PYTHONPATH`` alone finds none), mup and pydantic; not Ray.
On a machine that cannot reach a package index, build the wheels elsewhere
(``pip wheel --no-deps . mup``, ``pip download pydantic …``), then
``pip install --no-index --no-deps --target DIR *.whl`` there and set ``PYTHONPATH=DIR``.

Usage: python benchmarks/gpu_check.py [--config configs/gpt-text.yaml] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from typing import Any

#: the fewest bytes per parameter a step holds: float32 weight, gradient, Adam's two moments
BYTES_PER_PARAM_MIN = 16


def _task(config: Any, *, batch_size: int | None = None):
    """The config's ProxyTask with μP base shapes, at ``batch_size`` rows a step if given."""
    from mutune.proxies.task import ProxyTask, load_task_data

    train = config.train if batch_size is None else config.train.model_copy(
        update={"batch_size": int(batch_size)})
    return ProxyTask(config.model, train, load_task_data(config)).with_base_shapes()


def _train(task, model, opt, dev, steps: int, *, first_step: int = 1,
           each: bool = True, seed: int = 0) -> tuple[list, list]:
    """``steps`` training steps as the trainer takes them; (seconds per step, losses).
    ``each``: synchronize the device around every step to time it (False: only after the
    last, as the trainer runs, and every time is the mean)."""
    import torch

    times, losses = [], []
    cuda = dev.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t_all = time.perf_counter()
    for step in range(first_step, first_step + steps):
        if cuda and each:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, y = task.batch(seed, step)
        x, y = x.to(dev.device, non_blocking=True), y.to(dev.device, non_blocking=True)
        with dev.compute():
            loss = task.step_loss(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if cuda and each:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.detach())
    if cuda:
        torch.cuda.synchronize()
    if not each:
        times = [(time.perf_counter() - t_all) / max(1, steps)] * steps
    return times, [float(v) for v in losses]


def _peak_bytes(task, dev, width: int, hp: dict, lr: float) -> int:
    import torch

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    with torch.device(dev.device):
        model = task.build(width, hp)
    opt = task.optimizer(model, lr)
    _train(task, model, opt, dev, 2)
    peak = torch.cuda.max_memory_allocated()
    del model, opt
    torch.cuda.empty_cache()
    return peak


def pick_width(n_params, probes: dict[int, int], budget: float, *, step: int,
               cap: int) -> tuple[int | None, dict[str, float]]:
    """The widest multiple of ``step`` (≤ ``cap``) whose predicted peak memory fits ``budget``.

    Predicted peak(w) = α·N(w) + β·w + γ: α bytes per parameter (weights, gradients, the
    optimizer's state and its temporaries, the autocast copies), activations linear in width at
    fixed tokens and depth (Korthikanti et al. 2022, "Reducing Activation Recomputation",
    §4.1), γ what neither scales (the logits of a fixed vocabulary, workspaces). α, β, γ are
    fitted by least squares through the probes, α at least 16 (float32 weight, gradient and
    Adam's two moments).

    Args:
        n_params: ``width -> parameter count``. probes: {width: measured peak bytes}, three or
            more widths. budget: bytes allowed. step, cap: the width grid.
    Returns:
        (width or None when none fits, {"alpha": …, "beta": …, "gamma": …}).
    Raises:
        ValueError: fewer than three probe widths.
    """
    import numpy as np

    if len(probes) < 3:
        raise ValueError(f"probes = {sorted(probes)}: need three or more widths")
    ws = sorted(probes)
    design = np.array([[n_params(w), w, 1.0] for w in ws], dtype=float)
    peaks = np.array([probes[w] for w in ws], dtype=float)
    alpha, beta, gamma = np.linalg.lstsq(design, peaks, rcond=None)[0]
    if alpha < BYTES_PER_PARAM_MIN:     # refit the rest with α at its floor
        alpha = float(BYTES_PER_PARAM_MIN)
        beta, gamma = np.linalg.lstsq(design[:, 1:], peaks - alpha * design[:, 0],
                                      rcond=None)[0]
    beta, gamma = max(0.0, float(beta)), max(0.0, float(gamma))
    best = None
    for w in range(step, cap + 1, step):
        if alpha * n_params(w) + beta * w + gamma <= budget:
            best = w
    return best, {"alpha": float(alpha), "beta": beta, "gamma": gamma}


def run_target(a: argparse.Namespace, dev) -> dict[str, Any]:
    import torch

    from mutune.config import load_config
    from mutune.config.cost import device_kind_of
    from mutune.proxies.index_limit import INDEX_LIMIT
    from mutune.scaling.time_split import model_flops_per_step

    config = load_config(a.config)
    seq = int(getattr(config.model, "seq_len", 1) or 1)
    task = _task(config, batch_size=max(1, a.tokens_per_step // seq))
    hp = {"output_mult": 1.0}
    d_head = int(getattr(config.model, "d_head", 1) or 1)
    step = max(d_head, a.width_step - a.width_step % d_head)
    cuda = dev.device.type == "cuda"
    counts: dict[int, int] = {}

    def n_params(w: int) -> int:
        if w not in counts:
            counts[w] = task.n_params(w, hp)
        return counts[w]

    # the widest activation (tokens × ffn_ratio·width elements) under 2^31: at 65,536 tokens
    # and width 11,264 (2.95e9 elements) PyTorch 2.11's training step read out of bounds on
    # an H200 (NaN losses, then an illegal memory access; 32-bit indexing the likely cause)
    ffn = int(getattr(config.model, "ffn_ratio", 1) or 1)
    cap = min(a.max_width, (INDEX_LIMIT - 1) // (task.samples_per_step * ffn) // step * step)
    if cap < 3 * step:
        raise SystemExit(f"--tokens-per-step {a.tokens_per_step}: too many for a width of "
                         f"{3 * step} under 2^31 activation elements")
    probes: dict[int, int] = {}
    if cuda:
        probes = {w: _peak_bytes(task, dev, w, hp, a.lr) for w in (step, 2 * step, 3 * step)}
        total = torch.cuda.get_device_properties(0).total_memory
        width, fit = pick_width(n_params, probes, a.memory_fraction * total, step=step,
                                cap=cap)
        width = width or step
    else:
        width, fit = 2 * step, {}
    model = opt = None
    while True:
        try:
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            with torch.random.fork_rng(devices=[]), torch.device(dev.device):
                torch.manual_seed(a.seed)
                model = task.build(width, hp)
            opt = task.optimizer(model, a.lr)
            _train(task, model, opt, dev, a.warmup, seed=a.seed)
            break
        except torch.cuda.OutOfMemoryError:
            model = opt = None
            if width - step < step:
                raise
            width -= step
    times, losses = _train(task, model, opt, dev, a.steps, first_step=a.warmup + 1,
                           seed=a.seed)
    step_s = statistics.median(times)
    count = sum(p.numel() for p in model.parameters())
    depth = int(getattr(config.model, "depth", 0) or 0)
    flops = model_flops_per_step(count, task.samples_per_step, n_layer=depth, n_ctx=seq,
                                 d_model=width)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    kind = device_kind_of(name, config.cost.kinds()) if cuda else "cpu"
    peak = config.cost.device(kind).peak_flops
    return {
        "benchmark": "gpu_check", "part": "target", "config": a.config, "seed": a.seed,
        "device": name,
        "device_kind": kind, "peak_flops": peak, "flash_sdpa": dev.flash_sdpa,
        "autocast": str(dev.autocast_dtype).removeprefix("torch."), "width": width,
        "depth": depth, "n_params": count, "tokens_per_step": task.samples_per_step,
        "warmup": a.warmup, "steps": a.steps, "ms_per_step": step_s * 1e3,
        "width_cap": cap, "ms_per_step_range": [min(times) * 1e3, max(times) * 1e3],
        "tflops_per_s": flops / step_s / 1e12,
        "mfu": (flops / step_s / peak) if peak else None,
        "max_memory_gib": (torch.cuda.max_memory_allocated() / 2**30) if cuda else None,
        "total_memory_gib": (torch.cuda.get_device_properties(0).total_memory / 2**30)
        if cuda else None,
        "first_loss": losses[0], "last_loss": losses[-1],
        "finite": all(math.isfinite(v) for v in losses),
        "probes": {str(w): b / 2**30 for w, b in probes.items()}, "memory_fit": fit}


def _proxy_worker(a: dict, width: int, rank: int, barrier, queue) -> None:
    """One proxy training process (seed ``seed + rank``): build, warm up, wait at the
    barrier, train timed steps."""
    import torch

    from mutune.proxies.device import select_device

    from mutune.config import load_config

    torch.set_num_threads(1)
    task = _task(load_config(a["config"]))
    dev = select_device(prefer_cuda=not a["cpu_smoke"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(a["seed"] + rank)
        model = task.build(width, {"output_mult": 1.0}).to(dev.device)
    opt = task.optimizer(model, a["lr"])
    _train(task, model, opt, dev, a["warmup"], seed=a["seed"] + rank)
    barrier.wait()
    t0 = time.perf_counter()
    times, _ = _train(task, model, opt, dev, a["proxy_steps"], first_step=a["warmup"] + 1,
                      each=False, seed=a["seed"] + rank)
    queue.put({"samples": task.samples_per_step * len(times), "start": t0,
               "end": time.perf_counter()})


def _concurrent(a: argparse.Namespace, width: int, n: int) -> tuple[list[dict], dict]:
    """``n`` proxy processes released together; (their timings, the NVML figures of
    :class:`~mutune.search.trial.gpu_monitor.GpuMonitor` over their timed span)."""
    import multiprocessing as mp

    from mutune.search.trial.gpu_monitor import GpuMonitor

    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(n + 1), ctx.Queue()
    args = {k: getattr(a, k)
            for k in ("config", "lr", "warmup", "proxy_steps", "cpu_smoke", "seed")}
    procs = [ctx.Process(target=_proxy_worker, args=(args, width, rank, barrier, queue))
             for rank in range(n)]
    for p in procs:
        p.start()
    barrier.wait(timeout=a.start_timeout_s)
    # the trials' own NVML sampler (None without CUDA or NVML)
    monitor = GpuMonitor.for_visible_devices(interval_s=0.1)
    try:
        results = [queue.get(timeout=a.start_timeout_s) for _ in range(n)]
    finally:
        if monitor is not None:
            monitor.stop()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise RuntimeError(f"proxy processes exited with {bad}")
    return results, monitor.figures() if monitor is not None else {}


def run_proxies(a: argparse.Namespace) -> dict[str, Any]:
    from mutune.config import load_config

    config = load_config(a.config)
    width = max(config.widths)
    one, util_one = _concurrent(a, width, 1)
    many, util = _concurrent(a, width, a.proxies)
    alone = one[0]["samples"] / (one[0]["end"] - one[0]["start"])
    span = max(r["end"] for r in many) - min(r["start"] for r in many)
    total = sum(r["samples"] for r in many) / span
    each = sorted(r["samples"] / (r["end"] - r["start"]) for r in many)
    return {
        "benchmark": "gpu_check", "part": "proxies", "config": a.config, "seed": a.seed,
        "width": width,
        "processes": a.proxies, "steps": a.proxy_steps,
        "samples_per_step": one[0]["samples"] // a.proxy_steps,
        "alone_samples_per_s": alone, "total_samples_per_s": total, "speedup": total / alone,
        "per_process_samples_per_s": statistics.median(each),
        "per_process_samples_per_s_range": [each[0], each[-1]],
        "nvml_util_alone_pct": util_one.get("gpu_util_mean"),
        "nvml_util_alone_max_pct": util_one.get("gpu_util_max"),
        "nvml_util_pct": util.get("gpu_util_mean"), "nvml_util_max_pct": util.get("gpu_util_max"),
        "nvml_samples": int(util.get("gpu_samples", 0)),
        "nvml_error": None if util else "no CUDA device or NVML to sample"}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/gpt-text.yaml")
    p.add_argument("--part", choices=("all", "target", "proxies"), default="all")
    p.add_argument("--tokens-per-step", type=int, default=32768)
    p.add_argument("--width-step", type=int, default=1024)
    p.add_argument("--max-width", type=int, default=32768)
    p.add_argument("--memory-fraction", type=float, default=0.85)
    p.add_argument("--lr", type=float, default=2.0 ** -9)
    p.add_argument("--seed", type=int, default=0,
                   help="the target's init and batches; proxy i uses seed + i")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--proxies", type=int, default=8)
    p.add_argument("--proxy-steps", type=int, default=1000)
    p.add_argument("--start-timeout-s", type=float, default=300.0)
    p.add_argument("--out", default=None, help="append the JSON lines to this file")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="both parts on the CPU at tiny sizes (tests the code path)")
    a = p.parse_args(argv)
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    from mutune.proxies.device import select_device

    dev = select_device(prefer_cuda=not a.cpu_smoke)
    if dev.kind != "cuda" and not a.cpu_smoke:
        print(json.dumps({"benchmark": "gpu_check", "skipped": "no CUDA"}))
        return
    rows = []
    if a.part in ("all", "target"):
        rows.append(run_target(a, dev))
        print(json.dumps(rows[-1]), flush=True)
    if a.part in ("all", "proxies"):
        rows.append(run_proxies(a))
        print(json.dumps(rows[-1]), flush=True)
    if a.out:
        with open(a.out, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
