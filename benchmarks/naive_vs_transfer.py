"""The proof of the GPU-hours saved: run the naive sweep for real beside the transfer pipeline.

Issue 6's benchmark. In one run, on a configuration this machine can afford (by default the
MLP example, configs/mlp-digits.yaml: μP MLP on digits, proxies at widths 64/128/256,
target width 4096, here with 24 samples, ASHA max_t 200, grace 20, η 3):

1. the main job (:func:`mutune.pipeline.run_pipeline`): proxy sweeps → transfer → one target
   run, and its ledger with the *estimated* naive cost (docs/architecture.md §6: the largest proxy
   width's scheduler decisions priced at the target's measured seconds per step and
   evaluation plus the measured per-trial overhead);
2. the naive sweep itself: the same ASHA search (same sampled points, same trial seeds as the
   largest proxy width, ONE seed per trial — what a naive full-size sweep runs) run directly at
   the target width, through the same stage (:func:`mutune.pipeline.proxy_stage.sweep_width`),
   recorded as a second sweep in the same database;
3. the quality comparison on the test split (docs/transfer.md §1): the target's configuration
   and the naive sweep's best one (chosen on validation among its trials that reached max_t)
   are each trained with ``--eval-seeds`` evaluation seeds (the same seeds for both) and judged
   on test; the gap uses the seed medians.

GPU-hours are allocated device-seconds × devices / 3600 for every trial alike (on this
machine the devices are CPUs). Prints one JSON line:

    {"benchmark": "naive_vs_transfer", "naive_measured_gpu_hours", "naive_estimated_gpu_hours",
     "estimate_error": (estimated − measured) / measured, "proxy_gpu_hours",
     "target_gpu_hours", "transfer_gpu_hours": proxy + target,
     "saved_fraction": 1 − transfer / naive_measured,
     "ideal_saved_fraction": 1 − target / naive_measured, "tuning_overhead": proxy / target,
     "target_val_loss", "best_naive_val_loss",
     "quality_gap": (median target test − median naive-best test) / median naive-best test,
     "quality_gap_split": "test", "target_test_losses", "naive_best_test_losses" (one per
     evaluation seed), "quality_gap_interval" (paired bootstrap), "config"}

``best_naive_val_loss`` is the best final validation loss among naive trials that trained to
max_t (the budget the target run trains for; the choice, not the judgement). Usage:
    python benchmarks/naive_vs_transfer.py [--config configs/gpt-text.yaml] [--samples 24]
        [--target-width 4096] [--eval-seeds 3] [--seed S] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

EVAL_SEED_BASE = 900_000          # evaluation seeds: far from every sweep's seed streams


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=None,
                   help="sweep config (default: the MLP example, configs/mlp-digits.yaml)")
    p.add_argument("--widths", default=None, help="default: the config's")
    p.add_argument("--target-width", type=int, default=None, help="default: the config's")
    p.add_argument("--samples", type=int, default=None, help="default: the config's")
    p.add_argument("--eval-seeds", type=int, default=3)
    p.add_argument("--seed", type=int, default=None, help="sweep seed (default: the config's)")
    p.add_argument("--out", default=None)
    a = p.parse_args()

    import numpy as np

    from mutune.config import load_config, parse_config
    from mutune.pipeline import open_sweep, run_pipeline
    from mutune.pipeline.final_runs import train_configs
    from mutune.pipeline.proxy_stage import sweep_width
    from mutune.scaling.cost import gpu_hours
    from mutune.services.store import Store

    out = Path(a.out or tempfile.mkdtemp(prefix="mutune-naive-vs-transfer-"))
    out.mkdir(parents=True, exist_ok=True)
    d = load_config(a.config or "configs/mlp-digits.yaml").model_dump(mode="json")
    if a.widths:
        d["widths"] = [int(w) for w in a.widths.split(",")]
    if a.target_width:
        d["target"]["width"] = a.target_width
    if a.samples:
        d["search"]["num_samples"] = a.samples
    d["name"] = "naive-vs-transfer"
    if a.seed is not None:
        d["seed"] = a.seed
    cfg = parse_config(d)
    target_width = cfg.target.width
    naive_d = {**d, "name": "naive-vs-transfer-naive",
               "search": {**d["search"], "replicates": 1}}
    naive_cfg = parse_config(naive_d)
    t0 = time.perf_counter()
    with Store.open(f"sqlite:///{out / 'naive_vs_transfer.db'}") as store:
        res = run_pipeline(cfg, store, out_dir=out / "transfer")
        t_transfer = time.perf_counter() - t0
        with open_sweep(naive_cfg, store, out_dir=out / "naive") as run:
            # the largest proxy's index: the same trial seeds as the sweep the estimate prices
            _, naive = sweep_width(run, target_width, len(cfg.widths) - 1)
            done = [t for t in naive.trials if t.status == "completed" and t.reports
                    and math.isfinite(t.reports[-1]["val_loss"])]
            chosen = min(done, key=lambda t: t.reports[-1]["val_loss"]) if done else None
            t_naive = time.perf_counter() - t0 - t_transfer
            evals = [EVAL_SEED_BASE + k for k in range(a.eval_seeds)]
            finals = [res.target["config"]] + ([chosen.point["hparams"]] if chosen else [])
            rows = train_configs(run, target_width, finals, evals, cfg.target_steps, "final")
        naive_sweep_id = run.sweep_id
    c = res.cost
    tests = {i: {r["seed"]: r["test_loss"] for r in rows if r["config_index"] == i}
             for i in range(len(finals))}
    target_tests = [tests[0][s] for s in evals]
    naive_tests = [tests[1][s] for s in evals] if chosen else []
    gap = gap_iv = None
    if naive_tests:
        mt, mn = statistics.median(target_tests), statistics.median(naive_tests)
        gap = (mt - mn) / mn
        diffs = np.array(target_tests) - np.array(naive_tests)
        rng = np.random.default_rng(0)
        boot = diffs[rng.integers(0, len(diffs), (4000, len(diffs)))].mean(axis=1) / mn
        gap_iv = [float(v) for v in np.quantile(boot, [0.025, 0.975])]
    measured = sum(gpu_hours(t.timing["allocated_s"], t.timing["devices"])
                   for t in naive.trials)
    finals = [t.reports[-1]["val_loss"] for t in naive.trials
              if t.status == "completed" and t.reports
              and math.isfinite(t.reports[-1]["val_loss"])]
    best_naive = min(finals) if finals else None
    target_loss = res.target["val_loss"]
    transfer_h = c["proxy_gpu_hours"] + c["target_gpu_hours"]
    out_row = {
        "benchmark": "naive_vs_transfer",
        "naive_measured_gpu_hours": measured,
        "naive_estimated_gpu_hours": c["naive_gpu_hours"],
        "estimate_error": (c["naive_gpu_hours"] - measured) / measured,
        "proxy_gpu_hours": c["proxy_gpu_hours"],
        "target_gpu_hours": c["target_gpu_hours"],
        "transfer_gpu_hours": transfer_h,
        "saved_fraction": 1 - transfer_h / measured,
        "ideal_saved_fraction": 1 - c["target_gpu_hours"] / measured,
        "tuning_overhead": c["proxy_gpu_hours"] / c["target_gpu_hours"],
        "target_val_loss": target_loss,
        "best_naive_val_loss": best_naive,
        "quality_gap": gap, "quality_gap_split": "test", "quality_gap_interval": gap_iv,
        "target_test_losses": target_tests, "naive_best_test_losses": naive_tests,
        "naive_best_config": chosen.point["hparams"] if chosen else None,
        "eval_seeds": len(evals), "config": a.config or "configs/mlp-digits.yaml",
        "ideal_saved_fraction_ratio": None,
        "gate": (res.target.get("gate") or {}).get("outcome"),
        "naive_trials": len(naive.trials),
        "naive_steps": sum(t.last_step for t in naive.trials),
        "estimate_steps": c["naive_inputs"]["steps"],
        "device_kind": c["device_kind"], "ettr": c["ettr"], "mfu": c.get("mfu"),
        "target_width": target_width, "proxy_widths": cfg.widths,
        "samples": cfg.search.num_samples, "seed": cfg.seed,
        "transfer_s": round(t_transfer, 1), "naive_s": round(t_naive, 1),
        "sweep_id": res.sweep_id, "naive_sweep_id": naive_sweep_id, "out": str(out)}
    out_row["ideal_saved_fraction_ratio"] = (out_row["saved_fraction"]
                                             / out_row["ideal_saved_fraction"])
    print(json.dumps(out_row), flush=True)


if __name__ == "__main__":
    main()
