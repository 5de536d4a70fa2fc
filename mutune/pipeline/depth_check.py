"""The checks across depth at a fixed width — CompleteP, Depth-μP and no depth parametrization:
the optimum's drift and the depth slope of log2 lr* on log2 depth, with bootstrap intervals
over seeds (Efron & Tibshirani 1993, §6, §13.3). Dey et al. 2025, arXiv 2505.01618, §3;
Yang et al. 2023, "Tensor Programs VI", arXiv 2310.02244, §3."""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mutune._json import json_safe
from mutune.config import SweepConfig
from mutune.errors import ConfigError, FitError

__all__ = ["DEPTH_PARAMETRIZATIONS", "depth_config", "depth_configs", "depth_task",
           "run_depth_coord_check", "depth_optima", "depth_slope_verdict"]

#: the parametrizations a depth check compares (α = 1, α = ½, no depth scaling)
DEPTH_PARAMETRIZATIONS = ("completep", "depth_mup", "none")


def depth_config(config: SweepConfig, depth: int, parametrization: str,
                 base_depth: int) -> SweepConfig:
    """``config`` with its model at ``depth`` under ``parametrization``, validated.

    Raises:
        ConfigError: the model cannot take a depth parametrization, or the depths break a rule."""
    from mutune.config import parse_config

    if not hasattr(config.model, "depth_parametrization"):
        raise ConfigError(f"model.family = {config.model.family!r}: the depth check needs a "
                          "built-in family with depth_parametrization (gpt, or mlp with "
                          "residual: true)")
    d = config.model_dump(mode="json")
    d["model"].update(depth=int(depth), depth_parametrization=parametrization,
                      base_depth=int(base_depth))
    # one model at one depth: a depth ladder's own depths and target depth do not apply
    d["depths"], d["target"]["depth"] = None, None
    return parse_config(d, source=f"{config.name} at depth {depth}, {parametrization}")


def depth_task(task: Any, config: SweepConfig) -> Any:
    """``task`` with ``config``'s model and its own μP base shapes."""
    return dataclasses.replace(task, model=config.model, base_shapes=None).with_base_shapes()


def _check_depths(depths: Sequence[int]) -> list[int]:
    out = sorted({int(d) for d in depths})
    if len(out) < 2 or out[0] < 1:
        raise ConfigError(f"depths = {list(depths)}: give at least 2 distinct depths ≥ 1")
    return out


def depth_configs(config: SweepConfig, depths: Sequence[int],
                  parametrizations: Sequence[str] = DEPTH_PARAMETRIZATIONS
                  ) -> dict[tuple[str, int], SweepConfig]:
    """Every (parametrization, depth) the checks build, validated; the base depth is the smallest.

    Raises:
        ConfigError: fewer than 2 distinct depths, an unknown parametrization, or a model that
            cannot take a depth parametrization."""
    depths = _check_depths(depths)
    unknown = [p for p in parametrizations if p not in DEPTH_PARAMETRIZATIONS]
    if unknown or not parametrizations:
        raise ConfigError(f"parametrizations {list(parametrizations)}: each must be one of "
                          f"{list(DEPTH_PARAMETRIZATIONS)}")
    return {(p, d): depth_config(config, d, p, depths[0])
            for p in parametrizations for d in depths}


def depth_optima(log2_lr: Sequence[float], losses: dict[int, np.ndarray], *,
                 n_boot: int = 400, seed: int = 0) -> dict[str, Any]:
    """Per-depth optima and their spread, drift and depth slope, with bootstrap intervals.

    ``losses``: depth → final validation losses, shape (n_lr, n_seeds), NaN for a diverged run;
    ``log2_lr`` shape (n_lr,), increasing. Slopes are octaves of lr per octave of depth.

    Raises:
        FitError: a depth's seed-mean curve has fewer than 3 finite points."""
    from mutune.pipeline.preflight import grid_optimum

    depths = sorted(losses)
    grid = np.asarray(log2_lr, dtype=float)
    x = np.log2(depths)

    def figures(curves: dict[int, np.ndarray]) -> tuple[np.ndarray, list[str]]:
        found = [grid_optimum(grid, curves[d]) for d in depths]
        return np.array([v for v, _ in found]), [m for _, m in found]

    def mean(arr: np.ndarray) -> np.ndarray:
        return arr.mean(axis=1)

    opt, methods = figures({d: mean(losses[d]) for d in depths})
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        curves = {}
        for d in depths:
            n = losses[d].shape[1]
            curves[d] = mean(losses[d][:, rng.integers(0, n, n)])
        try:
            draws.append(figures(curves)[0])
        except FitError:
            continue
    boot = np.array(draws).reshape(-1, len(depths))

    def interval(values: np.ndarray) -> list[float]:
        if values.size == 0:
            return [math.nan, math.nan]
        return [float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975))]

    def slope(o: np.ndarray) -> float:
        return float(np.polyfit(x, o, 1)[0])

    return {"optimum_log2_lr": {d: float(v) for d, v in zip(depths, opt)},
            "optimum_log2_lr_interval": {d: interval(boot[:, i]) for i, d in enumerate(depths)},
            "method": dict(zip(depths, methods)),
            "grid_best_log2_lr": {d: float(grid[int(np.nanargmin(mean(losses[d])))])
                                  for d in depths},
            "spread_octaves": float(opt.max() - opt.min()),
            "spread_octaves_interval": interval(boot.max(axis=1) - boot.min(axis=1)
                                                if len(boot) else boot),
            "drift_octaves": float(opt[-1] - opt[0]),
            "drift_octaves_interval": interval(boot[:, -1] - boot[:, 0]),
            "slope": slope(opt),
            "slope_interval": interval(np.array([slope(b) for b in boot])),
            "n_seeds": {d: int(losses[d].shape[1]) for d in depths},
            "n_boot": int(len(boot))}


def depth_slope_verdict(slope_interval: Sequence[float], n_depths: int, *, on_edge: bool,
                        tolerance: float = 0.1) -> str:
    """The verdict on a depth slope, with :func:`mutune.scaling.verdict.rule_verdict`'s names."""
    lo, hi = (float(v) for v in slope_interval)
    if n_depths < 3:
        return "too_few_sizes"
    if on_edge:
        return "edge"
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi - lo > 4 * tolerance:
        return "noisy"
    if lo > tolerance or hi < -tolerance:
        return "drifting"
    if -tolerance <= lo and hi <= tolerance:
        return "stable"
    return "noisy"


def run_depth_coord_check(config: SweepConfig, *, width: int, depths: Sequence[int],
                          lr: float, steps: int = 3, seeds: Sequence[int] = (0, 1, 2),
                          out_dir: Path,
                          parametrizations: Sequence[str] = DEPTH_PARAMETRIZATIONS
                          ) -> dict[str, Any]:
    """Coord check across depth (Tensor Programs V, Appendix D.1): mean |output| per module role
    against depth; writes ``coord_check.json`` and ``coord_check.png`` into ``out_dir``.

    Raises:
        ConfigError: as :func:`depth_configs`. ProxyError: a depth below 2, or activations
            blew up (lower ``lr``)."""
    from mutune.proxies.coord_check import (CoordSetup, coord_check, plot_coord_check,
                                         slope_table)
    from mutune.proxies.task import ProxyTask, load_task_data

    configs = depth_configs(config, depths, parametrizations)
    depths = sorted({d for _, d in configs})
    hp = dict(config.search.fixed)
    base = ProxyTask(config.model, config.train, load_task_data(config))
    checks = []
    for par in parametrizations:
        tasks = {d: depth_task(base, configs[(par, d)]) for d in depths}
        checks.append(coord_check(
            CoordSetup(lambda d, p, tasks=tasks: tasks[d].build(width, hp),
                       lambda m, tasks=tasks: tasks[_depth_of(m, tasks)].optimizer(m, lr),
                       tasks[depths[0]].batch, tasks[depths[0]].loss),
            widths=depths, parametrization=par, steps=steps, seeds=seeds, axis="depth"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table: dict[str, Any] = {"axis": "depth", **slope_table(checks)}
    table["settings"] = {"lr": lr, "steps": steps, "seeds": list(seeds), "width": width,
                         "base_depth": depths[0], "model": config.model.family}
    (out / "coord_check.json").write_text(json.dumps(json_safe(table), indent=2) + "\n")
    plot_coord_check(checks, str(out / "coord_check.png"))
    return table


def _depth_of(model: Any, tasks: dict[int, Any]) -> int:
    depth = int(model.depth)
    if depth not in tasks:
        raise ConfigError(f"a model of depth {depth} is not one of the checked depths "
                          f"{sorted(tasks)}")
    return depth
