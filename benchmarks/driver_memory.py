"""Memory of the driver with a billion-parameter target: the target is never built early.

The MLP example config (configs/mlp-digits.yaml) with its target at width 32768 (an MLP of 2.1
billion parameters, 8.6 GB of float32 weights). Two runs of ``mutune``, each a subprocess whose
own RSS and that of every process it starts (Ray's GCS, raylet and workers) is sampled every 0.1
s from /proc:

* ``mutune run CONFIG --dry-run``: the plan (the target's time is extrapolated from its FLOPs,
  not timed: :func:`mutune.pipeline.dry_run.plan_sweep`);
* ``mutune run CONFIG`` with a budget the target's estimate cannot fit: the proxy sweeps, the
  confirmation designs, the gate and the loss law run; the target run is refused before it
  starts (``budget_exhausted``), i.e. everything before the target run.

Prints one JSON line:

    {"benchmark": "driver_memory", "target_params", "peak_rss_bytes_dry_run",
     "peak_rss_bytes_before_target", "peak_pss_bytes_dry_run", "peak_pss_bytes_before_target",
     "peak_rss_bytes_largest_process_before_target", "processes_at_peak_dry_run",
     "processes_at_peak_before_target" ([name, RSS bytes] at each peak sample, largest first),
     "status_before_target", "wall_s"}

The RSS sum counts pages shared between processes (torch's libraries in every Ray worker)
once per process, so it overstates the memory in use; the PSS sum (Linux: shared pages split
between the processes sharing them) is the fair total, given beside it. Usage:
    python benchmarks/driver_memory.py [--target-width 32768] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _tree(root: int) -> list[int]:
    """``root`` and every live descendant, from /proc/*/stat (Linux)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])     # field 4, after "(comm)"
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) bytes of ``pid`` from /proc/PID/status and smaps_rollup (0 when gone)."""
    rss = pss = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = float(line.split()[1]) * 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = float(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


def _name(pid: int) -> str:
    """The process's title (Ray names its workers ``ray::…``), else its command."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [w.decode(errors="replace") for w in cmd if w]
    if not words:         # no command line (a process exiting): its name and state instead
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return "?"
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
        return f"({comm}) state {rest.split()[0]}"
    if words[0].startswith("ray::") or len(words) == 1:
        return words[0][:60]
    return " ".join(Path(w).name if i == 0 else w for i, w in enumerate(words[:3]))[:60]


def _sample(proc: "subprocess.Popen[bytes]", every_s: float = 0.1) -> dict[str, Any]:
    """Peak sums of RSS and PSS over ``proc`` and its descendants until it exits, and at the
    peak RSS sample each process's name and RSS (largest first)."""
    peak: dict[str, Any] = {"rss": 0.0, "pss": 0.0, "largest": 0.0, "at_peak": []}
    t0 = time.perf_counter()
    while proc.poll() is None:
        pids = _tree(proc.pid)
        mem = [_memory(p) for p in pids]
        rss = sum(m[0] for m in mem)
        if rss > peak["rss"]:
            peak["at_peak_s"] = round(time.perf_counter() - t0, 1)
            peak["at_peak"] = sorted(([_name(p), int(m[0])] for p, m in zip(pids, mem)
                                      if m[0]), key=lambda x: -x[1])
        peak.update(rss=max(peak["rss"], rss), pss=max(peak["pss"], sum(m[1] for m in mem)),
                    largest=max([peak["largest"], *(m[0] for m in mem)]))
        time.sleep(every_s)
    return peak


def _run(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "mutune.services.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out: list[bytes] = []
    import threading

    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    peak = _sample(proc)
    proc.wait()
    reader.join(timeout=10)
    return peak, proc.returncode, b"".join(out).decode(errors="replace")


def main() -> None:
    import yaml

    from mutune.config import load_config
    from mutune.proxies.task import ProxyTask, load_task_data

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target-width", type=int, default=32768)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="driver-memory-"))
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_config("configs/mlp-digits.yaml")
    d = cfg.model_dump(mode="json")
    d["target"]["width"] = a.target_width
    # a budget the proxies fit (about 0.03 GPU-hours on 2 CPUs) and the target cannot
    d["budget"] = {**(d.get("budget") or {}), "gpu_hours": 0.5}
    path = out / "big_target.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    big = load_config(path)
    task = ProxyTask(big.model, big.train, load_task_data(big))
    n_params = task.n_params(big.target.width, dict(big.search.fixed))
    env = {**os.environ, "COLUMNS": "200"}
    db = f"sqlite:///{out / 'driver_memory.db'}"
    t0 = time.perf_counter()
    dry, rc_dry, log_dry = _run(["run", str(path), "--dry-run", "--db", db], env)
    if rc_dry != 0:
        raise SystemExit(f"the dry run failed ({rc_dry}):\n{log_dry[-3000:]}")
    real, rc, log = _run(["run", str(path), "--db", db, "--out", str(out / "run")], env)
    status = "budget_exhausted" if "budget" in log else f"exit {rc}"
    report = out / "run" / "report.json"
    if report.is_file():
        status = json.loads(report.read_text())["status"]
    print(json.dumps({
        "benchmark": "driver_memory", "target_width": a.target_width,
        "target_params": n_params,
        "peak_rss_bytes_dry_run": int(dry["rss"]),
        "peak_rss_bytes_before_target": int(real["rss"]),
        "peak_pss_bytes_dry_run": int(dry["pss"]),
        "peak_pss_bytes_before_target": int(real["pss"]),
        "peak_rss_bytes_largest_process_before_target": int(real["largest"]),
        "processes_at_peak_dry_run": dry["at_peak"],
        "processes_at_peak_before_target": real["at_peak"],
        "peak_at_s_before_target": real.get("at_peak_s"),
        "status_before_target": status, "exit_code": rc,
        "wall_s": round(time.perf_counter() - t0, 1), "out": str(out)}), flush=True)


if __name__ == "__main__":
    main()
