"""The proof of the GPU-hours saved: run the naive sweep for real beside the transfer pipeline.

Issue 6's benchmark. In one run, on a configuration this machine can afford (by default the
quickstart: μP MLP on digits, proxies at widths 64/128/256, target width 4096, here with 24
samples, ASHA max_t 200, grace 20, η 3):

1. the main job (:func:`mutune.pipeline.run_pipeline`): proxy sweeps → transfer → one target
   run, and its ledger with the *estimated* naive cost (docs/architecture.md §6: the largest proxy
   width's scheduler decisions priced at the target's measured seconds per step and
   evaluation plus the measured per-trial overhead);
2. the naive sweep itself: the same ASHA search (same sampled points, same trial seeds as the
   largest proxy width) run directly at the target width, through the same stage
   (:func:`mutune.pipeline.proxy_stage.sweep_width`), recorded as a second sweep in the same database.

GPU-hours are allocated device-seconds × devices / 3600 for every trial alike (on this
machine the devices are CPUs). Prints one JSON line:

    {"benchmark": "naive_vs_transfer", "naive_measured_gpu_hours", "naive_estimated_gpu_hours",
     "estimate_error": (estimated − measured) / measured, "proxy_gpu_hours",
     "target_gpu_hours", "transfer_gpu_hours": proxy + target,
     "saved_fraction": 1 − transfer / naive_measured,
     "ideal_saved_fraction": 1 − target / naive_measured, "tuning_overhead": proxy / target,
     "target_val_loss", "best_naive_val_loss", "quality_gap": (target − best_naive) / best_naive}

``best_naive_val_loss`` is the best final validation loss among naive trials that trained to
max_t (the budget the target run trains for). Usage:
    python benchmarks/naive_vs_transfer.py [--samples 24] [--target-width 4096] [--out DIR]
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
    p.add_argument("--target-width", type=int, default=4096)
    p.add_argument("--samples", type=int, default=24)
    p.add_argument("--seed", type=int, default=None, help="sweep seed (default: the config's)")
    p.add_argument("--out", default=None)
    a = p.parse_args()

    from mutune.config import load_config, parse_config
    from mutune.pipeline import open_sweep, run_pipeline
    from mutune.pipeline.proxy_stage import sweep_width
    from mutune.scaling.cost import gpu_hours
    from mutune.services.store import Store

    out = Path(a.out or tempfile.mkdtemp(prefix="mutune-naive-vs-transfer-"))
    out.mkdir(parents=True, exist_ok=True)
    d = load_config(a.config).model_dump(mode="json")
    d["widths"] = [int(w) for w in a.widths.split(",")]
    d["target"]["width"] = a.target_width
    d["search"]["num_samples"] = a.samples
    d["search"]["scheduler"].update(kind="asha", grace_period=20, reduction_factor=3,
                                    max_t=200)
    d["name"] = "naive-vs-transfer"
    if a.seed is not None:
        d["seed"] = a.seed
    cfg = parse_config(d)
    naive_cfg = parse_config({**d, "name": "naive-vs-transfer-naive"})
    t0 = time.perf_counter()
    with Store.open(f"sqlite:///{out / 'naive_vs_transfer.db'}") as store:
        res = run_pipeline(cfg, store, out_dir=out / "transfer")
        t_transfer = time.perf_counter() - t0
        with open_sweep(naive_cfg, store, out_dir=out / "naive") as run:
            # the largest proxy's index: the same trial seeds as the sweep the estimate prices
            _, naive = sweep_width(run, a.target_width, len(cfg.widths) - 1)
        naive_sweep_id = run.sweep_id
    t_naive = time.perf_counter() - t0 - t_transfer
    c = res.cost
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
        "quality_gap": None if best_naive is None else (target_loss - best_naive) / best_naive,
        "naive_trials": len(naive.trials),
        "naive_steps": sum(t.last_step for t in naive.trials),
        "estimate_steps": c["naive_inputs"]["steps"],
        "device_kind": c["device_kind"], "ettr": c["ettr"], "mfu": c.get("mfu"),
        "target_width": a.target_width, "proxy_widths": cfg.widths,
        "samples": a.samples, "seed": cfg.seed,
        "transfer_s": round(t_transfer, 1), "naive_s": round(t_naive, 1),
        "sweep_id": res.sweep_id, "naive_sweep_id": naive_sweep_id, "out": str(out)}
    print(json.dumps(out_row), flush=True)


if __name__ == "__main__":
    main()
