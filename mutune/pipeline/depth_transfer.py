"""The transfer check across depth (docs/transfer.md §9): validation loss against log2 learning
rate per depth at one width, for each depth parametrization, recorded as a sweep."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mutune._json import json_safe
from mutune.config import SweepConfig
from mutune.errors import ConfigError
from mutune.pipeline.depth_check import (DEPTH_PARAMETRIZATIONS, depth_configs, depth_optima,
                                         depth_slope_verdict, depth_task)
from mutune.pipeline.recording import Recorder

__all__ = ["DepthGrid", "run_depth_transfer_check"]


@dataclass(frozen=True)
class DepthGrid:
    """What the depth transfer check trains; ``tolerance`` is in octaves of lr per octave of
    depth."""
    depths: Sequence[int]
    log2_lrs: Sequence[float]
    seeds: int = 3
    steps: int = 60
    parametrizations: Sequence[str] = DEPTH_PARAMETRIZATIONS
    n_boot: int = 400
    tolerance: float = 0.1


def run_depth_transfer_check(config: SweepConfig, recorder: Recorder, *, width: int,
                             grid: DepthGrid, out_dir: Path) -> dict[str, Any]:
    """Validation loss against log2 learning rate per depth at ``width``, for each parametrization,
    as one run of the sweep's backend; writes ``transfer_check.json`` and ``.png`` to ``out_dir``.

    Raises:
        ConfigError: fewer than 2 depths, an unknown parametrization, a model without depth
            parametrizations, seeds or steps below 1. FitError: a curve with < 3 finite points."""
    from mutune.pipeline.sweep import open_sweep, stage_settings

    pars = tuple(grid.parametrizations)
    configs = depth_configs(config, grid.depths, pars)
    depths = sorted({d for _, d in configs})
    if grid.seeds < 1 or grid.steps < 1:
        raise ConfigError(f"seeds = {grid.seeds}, steps = {grid.steps}: both must be ≥ 1")
    lrs = [float(e) for e in grid.log2_lrs]
    deepest = configs[(pars[0], depths[-1])]
    cfg = deepest.model_copy(update={
        "name": f"{config.name}-depth-check", "widths": [int(width)],
        "target": deepest.target.model_copy(update={"width": int(width)})})
    result: dict[str, Any] = {"axis": "depth", "width": int(width), "depths": depths,
                              "log2_lr": lrs, "seeds": grid.seeds, "steps": grid.steps,
                              "model": config.model.family}
    # at the base depth every factor is 1: one model for every parametrization, trained once
    base = (pars[0], depths[0])
    group_of = {(p, d): base if d == depths[0] else (p, d) for p, d in configs}
    with open_sweep(cfg, recorder, out_dir=Path(out_dir)) as run:
        specs, ids = _groups(run, configs, group_of, width, depths[0], grid, config)
        outcomes = run.backend.run_groups(specs, stage_settings(
            run, name=f"check{run.sweep_id}-depth", max_t=grid.steps, metric="val_loss",
            mode="min"))
        for par in pars:
            losses = {d: _final_losses(outcomes["{}-d{}".format(*group_of[(par, d)])].trials,
                                       grid, len(lrs)) for d in depths}
            entry = _entry(losses, lrs, grid, config.seed)
            for depth in depths:
                if group_of[(par, depth)] == (par, depth):
                    recorder.proxy_sweep_finished(ids[(par, depth)], {
                        "optimum_log2_lr": entry["optimum_log2_lr"][depth],
                        "optimum_log2_lr_interval": entry["optimum_log2_lr_interval"][depth],
                        "loss": entry["loss"][depth], "trials": len(lrs) * grid.seeds})
            result[par] = {k: ({str(d): v for d, v in val.items()} if isinstance(val, dict)
                               and k != "rule" else val) for k, val in entry.items()}
        result["sweep_id"] = run.sweep_id
    out = Path(out_dir)
    result = json_safe(result)
    (out / "transfer_check.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot_depth(result, pars, out / "transfer_check.png")
    return result


def _groups(run: Any, configs: dict[tuple[str, int], SweepConfig],
            group_of: dict[tuple[str, int], tuple[str, int]], width: int, base_depth: int,
            grid: DepthGrid, config: SweepConfig) -> tuple[list[Any], dict[Any, int]]:
    """One group per trained (parametrization, depth), the deepest first."""
    from mutune.search.backends.groups import GroupSpec
    from mutune.search.searchers.space import trial_seeds

    lrs = [float(e) for e in grid.log2_lrs]
    seed_list = trial_seeds(config.seed, 0, grid.seeds)
    hp_fixed = dict(config.search.fixed)
    specs, ids = [], {}
    for (par, depth), c in configs.items():
        if group_of[(par, depth)] != (par, depth):
            continue
        ids[(par, depth)] = run.recorder.proxy_sweep_started(run.sweep_id, width, {
            "check": "transfer", "axis": "depth", "depth": depth,
            "depth_parametrization": par if depth > base_depth else "base depth (all)",
            "base_depth": base_depth, "log2_lr": lrs, "seeds": grid.seeds,
            "steps": grid.steps})
        points = [{"hparams": {**hp_fixed, "lr": 2.0 ** e}, "seed": s,
                   "index": i * grid.seeds + j}
                  for i, e in enumerate(lrs) for j, s in enumerate(seed_list)]
        specs.append(GroupSpec(width, ids[(par, depth)], f"{par}-d{depth}", points=points,
                               task=depth_task(run.task, c)))
    specs.sort(key=lambda s: -int(s.group.rpartition("-d")[2]))
    return specs, ids


def _final_losses(trials: list[Any], grid: DepthGrid, n_lrs: int) -> np.ndarray:
    finals = {t.point["index"]: (t.reports[-1]["val_loss"] if t.reports
                                 and t.last_step == grid.steps else math.nan) for t in trials}
    return np.array([[finals.get(i * grid.seeds + j, math.nan) for j in range(grid.seeds)]
                     for i in range(n_lrs)], dtype=float)


def _entry(losses: dict[int, np.ndarray], lrs: list[float], grid: DepthGrid,
           seed: int) -> dict[str, Any]:
    depths = sorted(losses)
    entry = depth_optima(lrs, losses, n_boot=grid.n_boot, seed=seed)
    edge = any(v <= lrs[0] or v >= lrs[-1] for v in entry["optimum_log2_lr"].values())
    entry["rule"] = {"axes": ["depth"], "slopes": {"depth": entry["slope"]},
                     "slope_intervals": {"depth": entry["slope_interval"]},
                     "verdicts": {"depth": depth_slope_verdict(
                         entry["slope_interval"], len(depths), on_edge=edge,
                         tolerance=grid.tolerance)}}
    entry["loss"] = {d: losses[d].mean(axis=1).tolist() for d in depths}
    entry["trials"] = int(sum(np.isfinite(v).sum() for v in losses.values()))
    return entry


def _plot_depth(result: dict[str, Any], parametrizations: Sequence[str], path: Path) -> None:
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
