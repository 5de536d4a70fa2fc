"""The checks across depth: does the optimal learning rate stay put, and do activations stay
Θ(1), as the model deepens at a fixed width — with CompleteP, with Depth-μP, and without a
depth parametrization?

:func:`run_depth_transfer_check` is the transfer check of docs/transfer.md §9: validation loss
against log2 learning rate per depth, one Ray Tune run holding every (parametrization, depth)
as its own group (each with its own model, :class:`~mutune.search.backends.groups.
GroupSpec`), one trial per (learning rate, seed), recorded as a sweep.
:func:`run_depth_coord_check` is the coord check across depth (in-process, a few steps).

Statistics: each depth's optimum is :func:`~mutune.pipeline.preflight.grid_optimum` of the
seed-mean curve; its 95 % interval, the spread and drift intervals and the depth slope's
interval come from one bootstrap over seeds (each depth's seeds resampled with replacement,
``n_boot`` times; Efron & Tibshirani 1993, "An Introduction to the Bootstrap", §6, percentile
intervals §13.3). The depth slope is the least-squares slope of log2 lr* on log2 depth
(octaves of learning rate per octave of depth): the depth coefficient c of the multi-axis rule
log h* = a + b·log w + c·log L, here at one width.

References: Dey et al. 2025, "Don't be lazy: CompleteP enables compute-efficient deep
transformers", arXiv 2505.01618, §3 and Figure 1 (the optimum's drift across depth without a
depth parametrization, its stability with α = 1); Yang et al. 2023, "Tensor Programs VI",
arXiv 2310.02244, §3 (Depth-μP, α = ½).
"""
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
from mutune.pipeline.recording import Recorder

__all__ = ["DEPTH_PARAMETRIZATIONS", "depth_config", "depth_configs", "depth_task",
           "run_depth_transfer_check",
           "run_depth_coord_check", "depth_optima", "depth_slope_verdict"]

#: the parametrizations a depth check compares (α = 1, α = ½, no depth scaling)
DEPTH_PARAMETRIZATIONS = ("completep", "depth_mup", "none")


def depth_config(config: SweepConfig, depth: int, parametrization: str,
                 base_depth: int) -> SweepConfig:
    """``config`` with its model at ``depth`` under ``parametrization`` (base depth
    ``base_depth``), validated as a config file would be.

    Raises:
        ConfigError: the model cannot take a depth parametrization (a plain MLP without
            ``residual: true``, a plugin family without ``depth_parametrization``), or the
            depths break a rule; the message names the field, the value and the rule.
    """
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
    """``task`` (a :class:`~mutune.proxies.task.ProxyTask`) with ``config``'s model (another
    depth or depth parametrization) and its own μP base shapes (a deeper model has more
    parameters to give shapes to)."""
    return dataclasses.replace(task, model=config.model, base_shapes=None).with_base_shapes()


def _check_depths(depths: Sequence[int]) -> list[int]:
    out = sorted({int(d) for d in depths})
    if len(out) < 2 or out[0] < 1:
        raise ConfigError(f"depths = {list(depths)}: give at least 2 distinct depths ≥ 1")
    return out


def depth_configs(config: SweepConfig, depths: Sequence[int],
                  parametrizations: Sequence[str] = DEPTH_PARAMETRIZATIONS
                  ) -> dict[tuple[str, int], SweepConfig]:
    """Every (parametrization, depth) the checks build, validated before anything is opened
    or trained; the base depth is the smallest depth.

    Raises:
        ConfigError: fewer than 2 distinct depths, an unknown parametrization, or a model that
            cannot take a depth parametrization (:func:`depth_config`).
    """
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

    Args:
        log2_lr: the grid, shape (n_lr,), increasing.
        losses: depth → final validation losses, shape (n_lr, n_seeds) (NaN: a diverged or
            unfinished run; a grid point with a NaN seed is left out of that curve).
        n_boot: bootstrap replicates over seeds; seed: their ``default_rng`` seed.
    Returns:
        {"optimum_log2_lr": {depth: v}, "optimum_log2_lr_interval": {depth: [lo, hi]},
        "method": {depth: "parabola" | "grid"}, "grid_best_log2_lr": {depth: the grid point
        of the lowest seed-mean loss}, "spread_octaves": max − min of the optima,
        "spread_octaves_interval", "drift_octaves": deepest − shallowest,
        "drift_octaves_interval", "slope": least-squares slope of the optima on log2 depth,
        "slope_interval", "n_seeds": {depth: n}, "n_boot": replicates that fitted}.
    Raises:
        FitError: a depth's seed-mean curve has fewer than 3 finite points.
    """
    from mutune.pipeline.preflight import grid_optimum

    depths = sorted(losses)
    grid = np.asarray(log2_lr, dtype=float)
    x = np.log2(depths)

    def figures(curves: dict[int, np.ndarray]) -> tuple[np.ndarray, list[str]]:
        found = [grid_optimum(grid, curves[d]) for d in depths]
        return np.array([v for v, _ in found]), [m for _, m in found]

    def mean(arr: np.ndarray) -> np.ndarray:      # a NaN seed leaves the point out
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
            continue        # a replicate whose curve lost too many points
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
    """The verdict on a depth slope, with :func:`mutune.scaling.verdict.rule_verdict`'s names
    and precedence: ``too_few_sizes`` (< 3 depths), ``edge`` (an optimum on the grid's edge),
    ``noisy`` (interval undefined, wider than 4 × ``tolerance``, or straddling ±tolerance),
    ``drifting`` (outside ±tolerance), ``stable`` (inside)."""
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


def run_depth_transfer_check(config: SweepConfig, recorder: Recorder, *, width: int,
                             depths: Sequence[int], log2_lrs: Sequence[float], seeds: int = 3,
                             steps: int = 60, out_dir: Path,
                             parametrizations: Sequence[str] = DEPTH_PARAMETRIZATIONS,
                             n_boot: int = 400, tolerance: float = 0.1) -> dict[str, Any]:
    """Validation loss against log2 learning rate per depth at one width, for each depth
    parametrization, as one Ray Tune run recorded as a sweep.

    Every (parametrization, depth, learning rate, seed) is one trial training ``steps`` steps;
    the base depth is the smallest depth, where every factor is 1 and the model is the same
    under every parametrization: it is trained once and shared. Each parametrization's entry
    holds :func:`depth_optima`'s figures and ``rule`` = {"axes": ["depth"], "slopes":
    {"depth": c}, "slope_intervals": {"depth": [lo, hi]}, "verdicts": {"depth": name}}
    (:func:`depth_slope_verdict`), ``loss`` (depth → seed-mean curve) and ``trials``.

    Writes ``transfer_check.json`` (``{"axis": "depth", "width": w, "depths": [...],
    "log2_lr": [...], "seeds": n, "steps": t, "completep": {...}, "depth_mup": {...},
    "none": {...}, "sweep_id": id}``) and ``transfer_check.png`` into ``out_dir``.

    Raises:
        ConfigError: fewer than 2 depths, an unknown parametrization, a model without depth
            parametrizations. FitError: a curve with fewer than 3 finite points.
    """
    from mutune.pipeline.sweep import open_sweep
    from mutune.search.backends.groups import GroupSpec
    from mutune.pipeline.sweep import stage_settings
    from mutune.search.searchers.space import trial_seeds

    configs = depth_configs(config, depths, parametrizations)
    depths = sorted({d for _, d in configs})
    if seeds < 1 or steps < 1:
        raise ConfigError(f"seeds = {seeds}, steps = {steps}: both must be ≥ 1")
    grid = [float(e) for e in log2_lrs]
    seed_list = trial_seeds(config.seed, 0, seeds)
    hp_fixed = dict(config.search.fixed)
    # the sweep's row lists what the check trains: one width, no target
    deepest = configs[(parametrizations[0], depths[-1])]
    cfg = deepest.model_copy(update={
        "name": f"{config.name}-depth-check", "widths": [int(width)],
        "target": deepest.target.model_copy(update={"width": int(width)})})
    result: dict[str, Any] = {"axis": "depth", "width": int(width), "depths": depths,
                              "log2_lr": grid, "seeds": seeds, "steps": steps,
                              "model": config.model.family}
    # at the base depth every factor is 1: one model for every parametrization, trained once
    base = (parametrizations[0], depths[0])
    group_of = {(p, d): base if d == depths[0] else (p, d) for p, d in configs}
    with open_sweep(cfg, recorder, out_dir=Path(out_dir)) as run:
        specs, ids = [], {}
        for (par, depth), c in configs.items():
            if group_of[(par, depth)] != (par, depth):
                continue
            ids[(par, depth)] = recorder.proxy_sweep_started(run.sweep_id, width, {
                "check": "transfer", "axis": "depth", "depth": depth,
                "depth_parametrization": par if depth > depths[0] else "base depth (all)",
                "base_depth": depths[0], "log2_lr": grid, "seeds": seeds, "steps": steps})
            points = [{"hparams": {**hp_fixed, "lr": 2.0 ** e}, "seed": s,
                       "index": i * seeds + j}
                      for i, e in enumerate(grid) for j, s in enumerate(seed_list)]
            specs.append(GroupSpec(width, ids[(par, depth)], f"{par}-d{depth}",
                                   points=points, task=depth_task(run.task, c)))
        # the deepest models first: their trials are the longest (the shallow fill the tail)
        specs.sort(key=lambda s: -int(s.group.rpartition("-d")[2]))
        outcomes = run.backend.run_groups(specs, stage_settings(
            run, name=f"check{run.sweep_id}-depth", max_t=steps, metric="val_loss",
            mode="min"))
        for par in parametrizations:
            losses = {}
            for depth in depths:
                trials = outcomes["{}-d{}".format(*group_of[(par, depth)])].trials
                finals = {t.point["index"]: (t.reports[-1]["val_loss"] if t.reports
                                             and t.last_step == steps else math.nan)
                          for t in trials}
                losses[depth] = np.array([[finals.get(i * seeds + j, math.nan)
                                           for j in range(seeds)] for i in range(len(grid))],
                                         dtype=float)
            entry = depth_optima(grid, losses, n_boot=n_boot, seed=config.seed)
            edge = any(v <= grid[0] or v >= grid[-1]
                       for v in entry["optimum_log2_lr"].values())
            entry["rule"] = {"axes": ["depth"], "slopes": {"depth": entry["slope"]},
                             "slope_intervals": {"depth": entry["slope_interval"]},
                             "verdicts": {"depth": depth_slope_verdict(
                                 entry["slope_interval"], len(depths), on_edge=edge,
                                 tolerance=tolerance)}}
            entry["loss"] = {d: losses[d].mean(axis=1).tolist() for d in depths}
            entry["trials"] = int(sum(np.isfinite(v).sum() for v in losses.values()))
            for depth in depths:
                if group_of[(par, depth)] != (par, depth):
                    continue
                recorder.proxy_sweep_finished(ids[(par, depth)], {
                    "optimum_log2_lr": entry["optimum_log2_lr"][depth],
                    "optimum_log2_lr_interval": entry["optimum_log2_lr_interval"][depth],
                    "loss": entry["loss"][depth], "trials": len(grid) * seeds})
            result[par] = {k: ({str(d): v for d, v in val.items()} if isinstance(val, dict)
                               and k != "rule" else val) for k, val in entry.items()}
        result["sweep_id"] = run.sweep_id
    out = Path(out_dir)
    result = json_safe(result)
    (out / "transfer_check.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot_depth(result, parametrizations, out / "transfer_check.png")
    return result


def _plot_depth(result: dict[str, Any], parametrizations: Sequence[str], path: Path) -> None:
    """One panel per parametrization: seed-mean loss against log2 lr, a line per depth, its
    optimum marked with its 95 % interval."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(parametrizations), figsize=(5.5 * len(parametrizations),
                                                                 4.5), sharey=True,
                             squeeze=False)
    for ax, par in zip(axes[0], parametrizations):
        entry = result[par]
        for d in result["depths"]:
            y = [np.nan if v is None else v for v in entry["loss"][str(d)]]
            ax.plot(result["log2_lr"], y, "o-", ms=3, label=f"depth {d}")
            lo, hi = entry["optimum_log2_lr_interval"][str(d)]
            if lo is not None and hi is not None:
                ax.axvspan(lo, hi, alpha=0.12, color=ax.lines[-1].get_color())
        rule = entry["rule"]
        ax.set_title(f"{par}: spread {entry['spread_octaves']:.2f} oct, slope "
                     f"{rule['slopes']['depth']:+.2f} ({rule['verdicts']['depth']})",
                     fontsize=9)
        ax.set_xlabel("log2 learning rate")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel(f"validation loss after {result['steps']} steps (nats)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_depth_coord_check(config: SweepConfig, *, width: int, depths: Sequence[int],
                          lr: float, steps: int = 3, seeds: Sequence[int] = (0, 1, 2),
                          out_dir: Path,
                          parametrizations: Sequence[str] = DEPTH_PARAMETRIZATIONS
                          ) -> dict[str, Any]:
    """Coord check across depth at ``width``: mean |output| of each module role (first and
    last block, their outputs — the residual stream —, embeddings, final norm, readout)
    against depth after ``steps`` steps at learning rate ``lr``, per depth parametrization
    (base depth: the smallest). Tensor Programs V, Appendix D.1, along depth.

    Writes ``coord_check.json`` (``{"axis": "depth", "completep": {"slopes": {role: slope},
    "depths": [...]}, "depth_mup": {...}, "none": {...}, "settings": {...}}``) and
    ``coord_check.png`` into ``out_dir``.

    Raises:
        ConfigError: as :func:`run_depth_transfer_check`. ProxyError: a depth below 2, or
            activations blew up (lower ``lr``).
    """
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
    """Which depth's task built ``model`` (its ``depth`` attribute)."""
    depth = int(model.depth)
    if depth not in tasks:
        raise ConfigError(f"a model of depth {depth} is not one of the checked depths "
                          f"{sorted(tasks)}")
    return depth
