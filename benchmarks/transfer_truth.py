"""Ground truth for the transfer: a grid at the target width against the pipeline's choice.

At the pipeline's target width, a grid trained to the full horizon (the target's steps):
a one-octave grid over the searched learning-rate range plus two octaves on each side (for the
MLP also over output_mult), every other hyperparameter at the median of the pipelines'
transferred values, 3 evaluation seeds per point; then a half-octave refinement around the best
point. The grid's best is chosen on validation (seed mean) and judged on test. Then for each
pipeline seed (the sweep seed of one full main-job run, docs/transfer.md) the transferred
configuration and the grid's best are each trained with ``--eval-seeds`` evaluation seeds
(training seeds of a final configuration), paired: the same seeds for both.

    regret            = mean over evaluation seeds of L_test(transferred) − L_test(grid best),
                        paired, with a paired-bootstrap 95 % interval (Efron & Tibshirani
                        1993, ch. 13) and the paired standard deviation
    regret_fraction   = regret / L_test(grid best)
    lr_error_octaves  = log2 lr(transferred) − the parabolic optimum of the seed-mean test
                        curve along lr (best grid point and its two neighbours)

The grid is cached in ``--cache`` keyed by the model and train sections, the searched ranges,
the width, steps and seeds, the data fingerprint, the package versions and a hash of the
model and training sources, so repeated runs
vary only the pipeline seed (the hyperparameters off the grid keep the values of the run
that trained it, ``grid_center``). Every run
goes through the pipeline's own stages on Ray (``run_pipeline``; the grid through
``train_configs``). Prints one JSON line per model:

    {"benchmark": "transfer_truth", "model", "target_width", "seeds" (pipeline seeds),
     "grid_best_test_loss", "transferred_test_loss", "regret", "regret_fraction",
     "regret_interval", "lr_error_octaves", "optimum_log2_lr", "optimum_log2_lr_interval",
     "optimum_output_mult", "per_seed": [...], "grid_size", "grid_runs", ...}

Figures over pipeline seeds are medians with their range. A pipeline whose own target run the
watch stopped as diverged still counts: its transferred configuration is read from the
database and trained with the evaluation seeds like the others (``per_seed[i]
.pipeline_status`` says ``target_diverged``). Usage:
    python benchmarks/transfer_truth.py --model gpt [--pipeline-seeds 0,1,2] [--eval-seeds 10]
    python benchmarks/transfer_truth.py --model mlp [--target-width 1024]
    python benchmarks/transfer_truth.py --model gpt-depth   # the (width 128, depth 8) target
                                                            # of a 32/64 × 2/4 ladder
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

CONFIGS = {"gpt": "configs/gpt-text.yaml", "mlp": "configs/mlp-digits.yaml",
           "gpt-depth": "configs/gpt-depth.yaml"}
EVAL_SEED_BASE = 900_000          # evaluation seeds: far from every sweep's seed streams


def _octave_grid(low: float, high: float, pad: int = 2, step: float = 1.0) -> list[float]:
    """log2-spaced values from log2(low) − pad to log2(high) + pad, ``step`` octaves apart."""
    lo, hi = math.floor(math.log2(low)) - pad, math.ceil(math.log2(high)) + pad
    n = int(round((hi - lo) / step))
    return [2.0 ** (lo + k * step) for k in range(n + 1)]


def _train(run, width, hparams_list, seeds, steps, label):
    """(config index, seed, val, test) of every run (:func:`train_configs`)."""
    from mutune.pipeline.final_runs import train_configs

    return [(r["config_index"], r["seed"], r["val_loss"], r["test_loss"])
            for r in train_configs(run, width, hparams_list, seeds, steps, label)]


def _points(hparams_list, rows):
    """Per point: seed-mean val and test, and the test loss of every seed."""
    pts = [{"hparams": h, "vals": {}, "tests": {}} for h in hparams_list]
    for i, s, v, te in rows:
        pts[i]["vals"][str(s)], pts[i]["tests"][str(s)] = v, te
    for q in pts:
        q["val"] = statistics.fmean(q["vals"].values()) if q["vals"] else math.inf
        q["test"] = statistics.fmean(q["tests"].values()) if q["tests"] else math.inf
    return pts


def _parabola(xs, ys):
    """Vertex of the parabola through the best point and its two neighbours (xs sorted)."""
    i = int(np.argmin(ys))
    if i == 0 or i == len(xs) - 1 or not all(map(math.isfinite, ys[i - 1:i + 2])):
        return float(xs[i]), "edge"
    a, b, c = np.polyfit(xs[i - 1:i + 2], ys[i - 1:i + 2], 2)
    return (float(-b / (2 * a)), "ok") if a > 0 else (float(xs[i]), "flat")


def _code_fingerprint() -> str:
    """sha256 of the sources that decide what a grid point trains (models, μP, task, data,
    trainable), so a cached grid is never reused across a change to them."""
    import mutune

    root = Path(mutune.__file__).parent
    files = sorted([*(root / "proxies").glob("*.py"),
                    *(root / "search" / "trial").glob("*.py")])
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _grid(run, model, width, steps, center, seeds, cache: Path):
    """The cached (or freshly trained) coarse + refined grid: points with seed-mean val/test."""
    from importlib.metadata import version

    import ray
    import torch

    cfg = run.config
    key_src = json.dumps({"model": cfg.model.model_dump(mode="json"),
                          "train": cfg.train.model_dump(mode="json"),
                          "search": cfg.search.space["lr"].model_dump(mode="json"),
                          "om": (cfg.search.space.get("output_mult").model_dump(mode="json")
                                 if "output_mult" in cfg.search.space else None),
                          "width": width, "steps": steps, "seeds": seeds,
                          "data": run.task.data.fingerprint,
                          "code": _code_fingerprint(),
                          "versions": [version("mutune"), torch.__version__, ray.__version__]},
                         sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    path = cache / f"grid-{model}-{key}.json"
    if path.exists():
        return json.loads(path.read_text()), True
    space = cfg.search.space
    axes = {"lr": _octave_grid(space["lr"].low, space["lr"].high)}
    if model == "mlp" and "output_mult" in space:
        axes["output_mult"] = _octave_grid(space["output_mult"].low, space["output_mult"].high)
    names = sorted(axes)
    coarse = [{**center, **dict(zip(names, combo))}
              for combo in itertools.product(*(axes[n] for n in names))]
    rows = _train(run, width, coarse, seeds, steps, "g0")
    first = _points(coarse, rows)
    best = min(first, key=lambda q: q["val"])["hparams"]
    refine = [{**best, **{n: best[n] * 2.0 ** (o * 0.5) for n, o in zip(names, offs)}}
              for offs in itertools.product((-1, 0, 1), repeat=len(names)) if any(offs)]
    rows2 = _train(run, width, refine, seeds, steps, "g1")
    points = first + _points(refine, rows2)
    grid = {"names": names, "axes": axes, "points": points, "seeds": seeds,
            "center": center, "runs": len(rows) + len(rows2), "key": key}
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(grid))
    return grid, False


def _paired_bootstrap(diff, n_boot=4000, seed=0):
    d = np.asarray(diff, dtype=float)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), (n_boot, len(d)))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(lo), float(hi)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(CONFIGS), default="gpt")
    p.add_argument("--config", default=None)
    p.add_argument("--target-width", type=int, default=None,
                   help="default: gpt 256 (the config's), mlp 1024")
    p.add_argument("--pipeline-seeds", default="0,1,2")
    p.add_argument("--eval-seeds", type=int, default=10)
    p.add_argument("--grid-seeds", type=int, default=3)
    p.add_argument("--cache", default="benchmarks/results/cache")
    p.add_argument("--out", default=None)
    a = p.parse_args()

    from mutune.config import load_config, parse_config
    from mutune.errors import SweepStopped
    from mutune.pipeline import open_sweep, run_pipeline
    from mutune.services.store import Store

    out = Path(a.out or tempfile.mkdtemp(prefix=f"mutune-truth-{a.model}-"))
    out.mkdir(parents=True, exist_ok=True)
    d = load_config(a.config or CONFIGS[a.model]).model_dump(mode="json")
    if a.target_width or a.model == "mlp":
        d["target"]["width"] = a.target_width or 1024
    d["name"] = f"transfer-truth-{a.model}"
    t0 = time.perf_counter()
    seeds_p = [int(s) for s in a.pipeline_seeds.split(",")]
    runs = []
    with Store.open(f"sqlite:///{out / 'transfer_truth.db'}") as store:
        for s in seeds_p:
            try:
                res = run_pipeline(parse_config({**d, "seed": s}), store, out_dir=out / f"p{s}")
                runs.append({"seed": s, "config": res.target["config"], "status": "completed",
                             "sweep_id": res.sweep_id, "cost": res.cost})
            except SweepStopped as stop:
                # the watch stopped the pipeline's own target run (diverged): the transferred
                # configuration is recorded, and this benchmark trains it with its own seeds
                row = store.sweep_rows(stop.sweep_id).get("target") if stop.sweep_id else None
                if stop.status != "target_diverged" or not row:
                    raise
                runs.append({"seed": s, "config": dict(row["config"]), "status": stop.status,
                             "sweep_id": stop.sweep_id, "cost": {}})
        cfg = parse_config(d)
        width, steps = cfg.target.width, cfg.target_steps
        names = sorted({k for r in runs for k in r["config"]})
        center = {n: float(np.median([r["config"][n] for r in runs])) for n in names}
        # the grid and the final runs evaluate once, at the end (all they are judged on)
        gd = {**d, "name": d["name"] + "-grid",
              # a depth ladder's target depth: the grid's model is the target's (the same
              # depth parametrization and base depth as the pipeline's target run)
              **({"depths": None, "target": {**d["target"], "depth": None},
                  "model": {**cfg.model.model_dump(mode="json"), "depth": cfg.target_depth}}
                 if cfg.depth_ladder else {}),
              "train": {**d["train"], "eval_every": steps},
              "search": {**d["search"],     # one rung at the end: evaluations land on it
                         "scheduler": {**d["search"]["scheduler"], "grace_period": steps,
                                       "max_t": steps}}}
        with open_sweep(parse_config(gd), store, out_dir=out / "grid") as run:
            grid, cached = _grid(run, a.model, width, steps, center,
                                 [EVAL_SEED_BASE + k for k in range(a.grid_seeds)],
                                 Path(a.cache))
            pts = grid["points"]
            best = min(pts, key=lambda q: q["val"])        # chosen on validation
            # the parabolic optimum of the seed-mean test curve along lr, at best's others
            line = sorted((q for q in pts if all(q["hparams"][n] == best["hparams"][n]
                                                 for n in grid["names"] if n != "lr")),
                          key=lambda q: q["hparams"]["lr"])
            xs = [math.log2(q["hparams"]["lr"]) for q in line]
            opt_lr, opt_fit = _parabola(xs, [q["test"] for q in line])
            # its interval: the same vertex on bootstrap resamples of the grid's seeds
            gseeds = sorted(line[0]["tests"])
            rng = np.random.default_rng(0)
            draws = []
            for _ in range(2000):
                pick = rng.choice(gseeds, len(gseeds))
                draws.append(_parabola(xs, [statistics.fmean(q["tests"].get(k, math.inf)
                                                             for k in pick)
                                            for q in line])[0])
            opt_iv = [float(v) for v in np.quantile(draws, [0.025, 0.975])]
            evals = [EVAL_SEED_BASE + 1000 + k for k in range(a.eval_seeds)]
            finals = [best["hparams"]] + [r["config"] for r in runs]
            rows = _train(run, width, finals, evals, steps, "final")
    by = {}
    for i, s, _, te in rows:
        by.setdefault(i, {})[s] = te
    best_test = [by[0][s] for s in evals]
    per_seed, regrets, fracs, lr_errs = [], [], [], []
    for j, r in enumerate(runs, start=1):
        diff = [by[j][s] - by[0][s] for s in evals]
        reg = statistics.fmean(diff)
        gb = statistics.fmean(best_test)
        lr_err = math.log2(r["config"]["lr"]) - opt_lr
        per_seed.append({"pipeline_seed": r["seed"], "config": r["config"],
                         "transferred_test_loss": statistics.fmean(by[j][s] for s in evals),
                         "regret": reg, "regret_fraction": reg / gb,
                         "regret_interval": _paired_bootstrap(diff, seed=r["seed"]),
                         "paired_sd": statistics.stdev(diff) if len(diff) > 1 else None,
                         "lr_error_octaves": lr_err,
                         "saved_fraction": r["cost"].get("saved_fraction"),
                         "pipeline_status": r["status"], "sweep_id": r["sweep_id"]})
        regrets.append(reg)
        fracs.append(reg / gb)
        lr_errs.append(lr_err)
    order = sorted(range(len(runs)), key=lambda k: regrets[k])
    med = per_seed[order[len(order) // 2]]
    print(json.dumps({
        "benchmark": "transfer_truth", "model": a.model, "target_width": width,
        "target_depth": cfg.target_depth, "proxy_widths": cfg.widths,
        "proxy_depths": cfg.proxy_depths,
        "seeds": seeds_p, "eval_seeds": a.eval_seeds, "grid_seeds": a.grid_seeds,
        "grid_best_test_loss": statistics.fmean(best_test),
        "grid_best_config": best["hparams"],
        "transferred_test_loss": statistics.median(q["transferred_test_loss"]
                                                   for q in per_seed),
        "regret": statistics.median(regrets), "regret_range": [min(regrets), max(regrets)],
        "regret_fraction": statistics.median(fracs),
        "regret_fraction_range": [min(fracs), max(fracs)],
        "regret_interval": med["regret_interval"], "paired_sd": med["paired_sd"],
        "lr_error_octaves": statistics.median(lr_errs),
        "lr_error_octaves_range": [min(lr_errs), max(lr_errs)],
        "optimum_log2_lr": opt_lr, "optimum_fit": opt_fit,
        "optimum_log2_lr_interval": opt_iv,
        "optimum_output_mult": best["hparams"].get("output_mult"),
        "grid_size": len(pts), "grid_runs": grid["runs"], "grid_cached": cached,
        "grid_center": grid.get("center"),
        "per_seed": per_seed, "wall_s": round(time.perf_counter() - t0, 1),
        "out": str(out)}), flush=True)


if __name__ == "__main__":
    main()
