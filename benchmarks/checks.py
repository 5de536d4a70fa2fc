"""Time the two checks users run, with their default settings (issue 3).

Runs ``mutune coord-check`` and ``mutune transfer-check`` on a config (default: the MLP
example, configs/mlp-digits.yaml) in fresh processes and prints one JSON object per line:

    {"benchmark": "coord_check", "seconds": …, "mup_max_abs_slope": …, "sp_readout_slope": …}
    {"benchmark": "transfer_check", "seconds": …, "mup_spread_octaves": …,
     "sp_drift_octaves": …, "mup_optimum_log2_lr": {…}, "sp_optimum_log2_lr": {…}}

``seconds`` is wall time of the whole command (Ray start-up included). Usage:
    python benchmarks/checks.py [CONFIG] [--out DIR] [--only coord|transfer]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mutune.services.cli", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--only", choices=["coord", "transfer"], default=None)
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="mutune-checks-"))
    cfg = [a.config or "configs/mlp-digits.yaml"]
    if a.only in (None, "coord"):
        s = _run(["coord-check", *cfg, "--out", str(out / "coord")])
        r = json.loads((out / "coord" / "coord_check.json").read_text())
        print(json.dumps({"benchmark": "coord_check", "seconds": round(s, 1),
                          "mup_max_abs_slope": max(abs(v) for v in r["mup"]["slopes"].values()),
                          "sp_readout_slope": r["sp"]["slopes"].get("readout"),
                          "mup_slopes": r["mup"]["slopes"], "sp_slopes": r["sp"]["slopes"],
                          "out": str(out / "coord")}), flush=True)
    if a.only in (None, "transfer"):
        s = _run(["transfer-check", *cfg, "--out", str(out / "transfer"),
                  "--db", f"sqlite:///{out / 'checks.db'}"])
        r = json.loads((out / "transfer" / "transfer_check.json").read_text())
        print(json.dumps({"benchmark": "transfer_check", "seconds": round(s, 1),
                          "mup_spread_octaves": r["mup"]["spread_octaves"],
                          "sp_drift_octaves": r["sp"]["drift_octaves"],
                          "mup_optimum_log2_lr": r["mup"]["optimum_log2_lr"],
                          "sp_optimum_log2_lr": r["sp"]["optimum_log2_lr"],
                          "out": str(out / "transfer")}), flush=True)


if __name__ == "__main__":
    main()
