"""The checks users run before trusting transfer: the coord check (in-process) and the
transfer check (a grid sweep of Ray Tune trials, recorded like any sweep)."""
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
from mutune.errors import FitError
from mutune.pipeline.recording import Recorder

__all__ = ["run_coord_check", "run_transfer_check", "grid_optimum"]


def _task(config: SweepConfig, parametrization: str, data: Any = None) -> Any:
    from mutune.proxies.task import ProxyTask, load_task_data

    model = config.model.model_copy(update={"parametrization": parametrization})
    return ProxyTask(model, config.train, data if data is not None else load_task_data(config))


def run_coord_check(config: SweepConfig, *, widths: Sequence[int], lr: float, steps: int = 3,
                    seeds: Sequence[int] = (0, 1, 2), out_dir: Path) -> dict[str, Any]:
    """Coord check at ``widths``, μP and SP (Yang et al. 2022, Tensor Programs V, Appendix D.1);
    writes ``coord_check.json`` and ``.png`` into ``out_dir`` and returns the JSON.

    Raises:
        ProxyError: bad widths/steps, or activations blew up (lower ``lr``)."""
    from mutune.proxies.coord_check import (CoordSetup, coord_check, plot_coord_check,
                                         slope_table)

    hp = {k: v for k, v in config.search.fixed.items()}
    checks = []
    data = None
    for par in ("mup", "sp"):
        task = _task(config, par, data)
        data = task.data
        checks.append(coord_check(
            CoordSetup(lambda w, p, task=task: task.build(w, hp),
                       lambda m, task=task: task.optimizer(m, lr), task.batch, task.loss),
            widths=widths, parametrization=par, steps=steps, seeds=seeds))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = slope_table(checks)
    table["settings"] = {"lr": lr, "steps": steps, "seeds": list(seeds),
                         "model": config.model.family}
    (out / "coord_check.json").write_text(json.dumps(json_safe(table), indent=2) + "\n")
    plot_coord_check(checks, str(out / "coord_check.png"))
    return table


def grid_optimum(log2_lr: Sequence[float], loss: Sequence[float]) -> tuple[float, str]:
    """Optimum log2 lr of a loss grid: the vertex of a parabola through the best point and up to
    two neighbours each side, clipped; the best point when it opens downward.

    Returns (optimum in log2 units, ``parabola`` or ``grid``).

    Raises:
        FitError: fewer than 3 finite points."""
    x = np.asarray(log2_lr, dtype=float)
    y = np.asarray(loss, dtype=float)
    keep = np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        raise FitError(f"need at least 3 finite grid points, got {len(x)}")
    i = int(np.argmin(y))
    lo = max(0, min(i - 2, len(x) - 5))
    xs, ys = x[lo:lo + 5], y[lo:lo + 5]
    a, b, _ = np.polyfit(xs, ys, 2)
    if a <= 0:
        return float(x[i]), "grid"
    return float(np.clip(-b / (2 * a), xs.min(), xs.max())), "parabola"


def run_transfer_check(config: SweepConfig, recorder: Recorder, *, widths: Sequence[int],
                       log2_lrs: Sequence[float], seeds: int = 3, steps: int = 60,
                       out_dir: Path) -> dict[str, Any]:
    """The μTransfer plot as Ray Tune trials: validation loss against log2 lr per width, μP beside
    SP (Yang et al. 2022, Tensor Programs V, Figure 1); writes ``transfer_check.json`` and
    ``.png`` into ``out_dir`` and returns the JSON."""
    from mutune.pipeline.sweep import open_sweep
    from mutune.search.searchers.space import trial_seeds
    from mutune.pipeline.sweep import stage_settings
    from mutune.search.backends.base import run_group
    from mutune.search.backends.groups import GroupSpec

    widths = sorted(int(w) for w in widths)
    grid = [float(e) for e in log2_lrs]
    seed_list = trial_seeds(config.seed, 0, seeds)
    hp_fixed = {k: v for k, v in config.search.fixed.items()}
    cfg = config.model_copy(update={"name": f"{config.name}-transfer-check"})
    result: dict[str, Any] = {"log2_lr": grid, "widths": widths, "seeds": seeds,
                              "steps": steps, "model": config.model.family}
    with open_sweep(cfg, recorder, out_dir=Path(out_dir)) as run:
        for par in ("mup", "sp"):
            task = dataclasses.replace(run.task, model=run.task.model.model_copy(
                update={"parametrization": par}))
            curves: dict[int, list[float]] = {}
            optima: dict[int, float] = {}
            for width in widths:
                points = [{"hparams": {**hp_fixed, "lr": 2.0 ** e}, "seed": seed_list[0],
                           "replicate_seeds": seed_list, "index": i}
                          for i, e in enumerate(grid)]
                ps_id = recorder.proxy_sweep_started(run.sweep_id, width, {
                    "check": "transfer", "parametrization": par, "log2_lr": grid,
                    "seeds": seeds, "steps": steps})
                outcome = run_group(
                    run.backend, GroupSpec(width, ps_id, f"w{width}", points=points),
                    stage_settings(run, name=f"check{run.sweep_id}-{par}-w{width}",
                                   max_t=steps, task=task, metric="val_loss", mode="min"))
                finals = {t.point["index"]: (t.reports[-1]["val_loss"] if t.reports
                                             and t.last_step == steps else math.nan)
                          for t in outcome.trials}
                curve = [float(finals.get(i, math.nan)) for i in range(len(grid))]
                curves[width] = curve
                optima[width], method = grid_optimum(grid, curve)
                recorder.proxy_sweep_finished(ps_id, {"optimum_log2_lr": optima[width],
                                                      "method": method, "loss": curve,
                                                      "trials": len(outcome.trials)})
            entry: dict[str, Any] = {"optimum_log2_lr": {str(w): v for w, v in optima.items()},
                                     "loss": {str(w): c for w, c in curves.items()}}
            vals = list(optima.values())
            if par == "mup":
                entry["spread_octaves"] = max(vals) - min(vals)
            else:
                entry["drift_octaves"] = optima[widths[-1]] - optima[widths[0]]
            result[par] = entry
        result["sweep_id"] = run.sweep_id
    out = Path(out_dir)
    result = json_safe(result)
    (out / "transfer_check.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot_transfer(result, out / "transfer_check.png")
    return result


def _plot_transfer(result: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, par in zip(axes, ("mup", "sp")):
        entry = result[par]
        for w in result["widths"]:
            y = [np.nan if v is None else v for v in entry["loss"][str(w)]]
            ax.plot(result["log2_lr"], y, "o-", ms=3, label=f"width {w}")
            ax.axvline(entry["optimum_log2_lr"][str(w)], lw=0.6, alpha=0.5,
                       color=ax.lines[-1].get_color())
        figure = (f"spread {entry['spread_octaves']:.2f} oct" if par == "mup"
                  else f"drift {entry['drift_octaves']:.2f} oct")
        ax.set_title(f"{'μP' if par == 'mup' else 'SP'}: {figure}")
        ax.set_xlabel("log2 learning rate")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[0].set_ylabel(f"validation loss after {result['steps']} steps (nats)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
