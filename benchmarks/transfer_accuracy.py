"""Does the transferred learning rate land where a direct sweep at the target width finds it?

Issue 5's check on the μP MLP / digits sweep (the quickstart config): sweep widths ≤ 256 with
ASHA, fit the transfer rule, predict the LR at width 1024 — then sweep width 1024 directly with
the same search (same sampled points) and estimate its optimum the same way, at the same rung
as the proxies (:func:`mutune.pipeline.proxy_stage.align_optima`: optima compared at equal budget). Each
trial trains ``--replicates`` seeds in lockstep and reports their mean, since single-seed
validation losses on digits are too noisy to place an optimum within half an octave. Both go
through the pipeline's own stages (:func:`mutune.pipeline.proxy_stage.sweep_width`,
:func:`mutune.pipeline.transfer_stage.fit_rules`); nothing here re-implements a sweep or a fit. Prints:

    {"benchmark": "transfer_accuracy", "target_width": 1024, "transferred_log2_lr": …,
     "direct_log2_lr": …, "error_octaves": …, …}

and writes ``transfer_accuracy.png`` (optimum per width with intervals, the fitted rule, the
transferred value and the direct optimum at 1024). Usage:
    python benchmarks/transfer_accuracy.py [--samples 64] [--replicates 4] [--widths 64,128,256]
    [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=None, help="sweep config (default: quickstart)")
    p.add_argument("--widths", default="64,128,256")
    p.add_argument("--target-width", type=int, default=1024)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--replicates", type=int, default=4,
                   help="seeds per trial, trained in lockstep (search.replicates)")
    p.add_argument("--seed", type=int, default=None, help="sweep seed (default: the config's)")
    p.add_argument("--out", default=None)
    a = p.parse_args()

    from mutune.config import load_config, parse_config
    from mutune.pipeline import open_sweep
    from mutune.pipeline.proxy_stage import align_optima, sweep_width
    from mutune.pipeline.transfer_stage import fit_rules
    from mutune.services.store import Store

    out = Path(a.out or tempfile.mkdtemp(prefix="mutune-transfer-accuracy-"))
    out.mkdir(parents=True, exist_ok=True)
    d = load_config(a.config).model_dump(mode="json")
    d["widths"] = [int(w) for w in a.widths.split(",")]
    d["target"]["width"] = a.target_width
    d["search"]["num_samples"] = a.samples
    d["search"]["replicates"] = a.replicates
    d["name"] = "transfer-accuracy"
    if a.seed is not None:
        d["seed"] = a.seed
    cfg = parse_config(d)
    t0 = time.perf_counter()
    with Store.open(f"sqlite:///{out / 'transfer_accuracy.db'}") as store, \
            open_sweep(cfg, store, out_dir=out) as run:
        swept = [sweep_width(run, w, i) for i, w in enumerate(cfg.widths)]
        swept.append(sweep_width(run, a.target_width, len(cfg.widths)))
        # every width, the direct sweep included, estimated at one common rung (equal budget)
        aligned = [p for p, _ in align_optima(run, swept)]
        proxies, direct = aligned[:-1], aligned[-1]
        rules, target_hp, _ = fit_rules(run, proxies)
    lr_rule = next(r for r in rules if r["hyperparameter"] == "lr")
    transferred = math.log2(target_hp["lr"])
    direct_lr = direct.optimum["optimum"]["lr"]
    direct_iv = direct.optimum["interval"]["lr"]
    res = {"benchmark": "transfer_accuracy", "target_width": a.target_width,
           "transferred_log2_lr": transferred, "direct_log2_lr": math.log2(direct_lr),
           "error_octaves": abs(transferred - math.log2(direct_lr)),
           "direct_log2_lr_interval": _log2_interval(direct_iv),
           "transferred_log2_lr_interval": _log2_interval(lr_rule["transferred_interval"]),
           "slope": lr_rule["slope"], "slope_interval": lr_rule["slope_interval"],
           "verdict": lr_rule["verdict"], "proxy_widths": cfg.widths,
           "proxy_log2_lr": [math.log2(v) for v in lr_rule["optima"]],
           "samples_per_width": a.samples, "replicates": a.replicates,
           "seed": cfg.seed,
           "optimum_rungs": [p.optimum["milestone"] for p in aligned],
           "seconds": round(time.perf_counter() - t0, 1),
           "sweep_id": run.sweep_id, "out": str(out)}
    print(json.dumps(res), flush=True)
    _plot(res, lr_rule, direct, out / "transfer_accuracy.png")


def _log2_interval(iv) -> list[float] | None:
    if not iv or not all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in iv):
        return None
    return [math.log2(v) for v in iv]


def _plot(res: dict, rule: dict, direct, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    w = rule["widths"]
    y = [math.log2(v) for v in rule["optima"]]
    ivs = rule.get("optima_intervals")
    if ivs:
        # a weighted-mean optimum can sit outside its percentile interval: clamp at 0
        ax.errorbar(w, y, yerr=[[max(yy - math.log2(lo), 0) for yy, (lo, _) in zip(y, ivs)],
                                [max(math.log2(hi) - yy, 0) for yy, (_, hi) in zip(y, ivs)]],
                    fmt="o", capsize=3, label="proxy optimum (95 % interval)")
    else:
        ax.plot(w, y, "o", label="proxy optimum")
    xs = np.geomspace(min(w), res["target_width"], 50)
    ax.plot(xs, (rule["intercept"] + rule["slope"] * np.log(xs)) / math.log(2), "-", lw=1,
            label=f"rule, slope {rule['slope']:.3f}")
    ax.plot([res["target_width"]], [res["transferred_log2_lr"]], "*", ms=12,
            label="transferred to target")
    div = res["direct_log2_lr_interval"]
    ax.errorbar([res["target_width"] * 1.08], [res["direct_log2_lr"]],
                yerr=None if not div else [[max(res["direct_log2_lr"] - div[0], 0)],
                                           [max(div[1] - res["direct_log2_lr"], 0)]],
                fmt="s", capsize=3, label="direct sweep at target")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width")
    ax.set_ylabel("optimal log2 learning rate")
    ax.set_title(f"transfer error {res['error_octaves']:.2f} octaves")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
