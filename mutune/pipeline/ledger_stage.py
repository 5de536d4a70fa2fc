"""The ledger stage: each width's model FLOPs and the device's peak FLOP/s, handed to
:func:`mutune.scaling.ledger.compute_cost`, and its entries recorded."""
from __future__ import annotations

import functools
from typing import Any

from mutune.config import SweepConfig
from mutune.pipeline.sweep import SweepRun

__all__ = ["record_cost", "flops_per_sample", "peak_flops", "design_size"]


def flops_per_sample(config: SweepConfig, width: int, n_params: float,
                     depth: int | None = None) -> float:
    """Model training FLOPs per sample (MLP) or token (GPT), Kaplan et al. 2020 §2.1, or the
    plugin's own count."""
    from mutune.config import GPTModel
    from mutune.proxies.plugins import load_family
    from mutune.scaling.time_split import model_flops_per_step

    m = config.model
    family = load_family(m.family)
    if depth is not None and depth != m.depth:
        m = m.model_copy(update={"depth": int(depth)})
    if family.flops_per_sample is not None:
        return float(family.flops_per_sample(width, n_params, m))
    if isinstance(m, GPTModel):
        return model_flops_per_step(n_params, 1, n_layer=m.depth, n_ctx=m.seq_len,
                                    d_model=width)
    return model_flops_per_step(n_params, 1)


def design_size(key: str) -> int | tuple[int, int]:
    """A design trial's proxy from its key: ``c0w64-t3`` → 64, ``c0w64d4-t3`` → (64, 4)."""
    size = key.split("-")[0].split("w")[-1]
    if "d" in size:
        width, depth = size.split("d")
        return int(width), int(depth)
    return int(size)


def peak_flops(config: SweepConfig, kind: str) -> tuple[float | None, str]:
    """Peak FLOP/s per device of ``kind`` and where it came from (config table or measured)."""
    peak = config.cost.device(kind).peak_flops
    if peak is not None:
        return peak, f"device table ({kind})"
    if kind == "cpu":
        from mutune.proxies.device import measure_cpu_peak_flops
        return measure_cpu_peak_flops(), "measured: one thread's float32 matmul rate"
    return None, f"no peak FLOP/s for device kind {kind!r} in cost.devices"


def record_cost(run: SweepRun, outcomes: dict[int, Any], target: Any,
                extra: list[Any] = ()) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Compute the sweep's ledger from its recorded trials and record its entries.

    Returns (cost figures keyed as report.json's ``cost``, the ledger entries recorded)."""
    from mutune.scaling.ledger import FlopsModel, compute_cost

    config = run.config
    kind = target.timing["device_kind"]
    peak, source = peak_flops(config, kind)
    width_of = {t.trial_id: design_size(t.key) for o in extra for t in o.trials}
    # one count per model size (the family's plugin lookup took ≈ 20 ms a trial)
    flops = functools.cache(lambda size, n_params: flops_per_sample(
        config, size[0], n_params, depth=size[1]) if isinstance(size, tuple)
        else flops_per_sample(config, size, n_params))
    model = FlopsModel(flops, peak, source,
                       target_size=((config.target.width, config.target_depth)
                                    if config.depth_ladder else None))
    cost, entries = compute_cost(
        config, outcomes, target, flops=model,
        extra_trials=[(width_of[t.trial_id], t) for o in extra for t in o.trials],
        resources=run.resources, sweep_start=run.started_at)
    run.recorder.ledger_recorded(run.sweep_id, entries)
    return cost, entries
