"""The promise on README's command 1, seed by seed: the quickstart run once per ``seed``.

Each seed runs ``mutune run <config with seed: S>`` in a folder of its own, as a user runs it
(the CLI, its own Ray cluster, a fresh SQLite database), and is summarised from its
``report.json``. One JSON line per seed:

    {"benchmark": "quickstart_seeds", "seed", "wall_s", "verdicts" {knob: verdict},
     "loss_at_stake" {knob: share of the loss}, "all_healthy", "gate_outcome", "gate_warning",
     "target_test_loss", "best_proxy_test_loss", "beats_every_proxy",
     "predicted_val_loss", "predicted_interval", "prediction_half_width" (share of the
     prediction), "target_val_loss", "prediction_contains", "saved_fraction",
     "ideal_saved_fraction", "saved_vs_ideal", "saved_flops_fraction",
     "ideal_saved_flops_fraction", "config"}

``all_healthy``: every rule ``stable`` or ``drifting`` (docs/transfer.md §3). Wall seconds
exclude the install. Usage:
    python benchmarks/quickstart_seeds.py [--config configs/quickstart.yaml] [--seeds 0 1 2]
        [--out DIR]
    python benchmarks/quickstart_seeds.py --reports DIR/seed-0 …   # summarise finished runs
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from mutune.pipeline.run_folder import LATEST

HEALTHY = ("stable", "drifting")


def run_seed(config: Path, seed: int, folder: Path) -> float:
    """Run the quickstart with ``seed`` in ``folder`` through the CLI; wall seconds.

    Raises:
        RuntimeError: the run exited non-zero (its log is in ``folder/run.log``)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
    cfg["seed"] = seed
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    mutune = Path(sys.executable).with_name("mutune")
    t0 = time.perf_counter()
    with open(folder / "run.log", "w", encoding="utf-8") as log:
        rc = subprocess.call([str(mutune), "run", "config.yaml"], cwd=folder, stdout=log,
                             stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"seed {seed}: mutune run exited {rc}; see {folder / 'run.log'}")
    return wall


def summarise(report: dict[str, Any], *, seed: int, wall_s: float | None) -> dict[str, Any]:
    """One benchmark row from a run's ``report.json``."""
    rules = report.get("rules") or []
    target = report.get("target") or {}
    cost = report.get("cost") or {}
    gate = report.get("gate") or {}
    proxies = [p["best_test_loss"] for p in report.get("proxies") or []
               if p.get("best_test_loss") is not None]
    best = min(proxies) if proxies else None
    pred, iv = target.get("predicted_val_loss"), target.get("predicted_val_loss_interval")
    val, test = target.get("val_loss"), target.get("test_loss")
    saved, ideal = cost.get("saved_fraction"), cost.get("ideal_saved_fraction")
    verdicts = {r["hyperparameter"]: r.get("verdict") for r in rules}
    return {
        "benchmark": "quickstart_seeds", "seed": seed, "wall_s": wall_s,
        "verdicts": verdicts,
        "loss_at_stake": {r["hyperparameter"]: (r.get("loss_at_stake") or {}).get("relative")
                          for r in rules},
        "all_healthy": bool(verdicts) and all(v in HEALTHY for v in verdicts.values()),
        "gate_outcome": gate.get("outcome"), "gate_warning": gate.get("warning"),
        "target_test_loss": test, "best_proxy_test_loss": best,
        "beats_every_proxy": None if test is None or best is None else test < best,
        "predicted_val_loss": pred, "predicted_interval": iv,
        "prediction_half_width": None if not iv or not pred else (iv[1] - iv[0]) / 2 / pred,
        "target_val_loss": val,
        "prediction_contains": None if not iv or val is None else iv[0] <= val <= iv[1],
        "saved_fraction": saved, "ideal_saved_fraction": ideal,
        "saved_vs_ideal": None if saved is None or not ideal else saved / ideal,
        "saved_flops_fraction": cost.get("saved_flops_fraction"),
        "ideal_saved_flops_fraction": cost.get("ideal_saved_flops_fraction"),
        "config": report.get("name")}


def _report(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "mutune-out" / LATEST / "report.json").read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/quickstart.yaml"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", type=Path, default=Path("quickstart-seeds"))
    p.add_argument("--reports", type=Path, nargs="+",
                   help="summarise these finished runs' folders instead (seed from each "
                        "report's config); wall_s is then null")
    a = p.parse_args()
    if a.reports:
        for folder in a.reports:
            rep = _report(folder)
            cfg = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
            print(json.dumps(summarise(rep, seed=int(cfg.get("seed", 0)), wall_s=None)))
        return
    for seed in a.seeds:
        folder = a.out.resolve() / f"seed-{seed}"
        wall = run_seed(a.config.resolve(), seed, folder)
        print(json.dumps(summarise(_report(folder), seed=seed, wall_s=wall)), flush=True)


if __name__ == "__main__":
    main()
