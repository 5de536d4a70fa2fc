"""Search-server load on loopback (issue 8): the sweep-status endpoint against a bare endpoint.

In one run, on 127.0.0.1:
1. the real server (``mutune serve --no-worker``, uvicorn, SQLite) with a seeded running sweep
   (2 widths × 8 trials with reports and decisions) in its database, and
2. a bare FastAPI app under the same uvicorn settings whose one endpoint returns a constant
   JSON body,
are each driven by the same load generator for the same duration at ``--concurrency``
connections (keep-alive) against ``GET /api/v1/sweeps/{id}`` (with a bearer token) and the bare
endpoint. The load generator is Debian's ``wrk`` when installed (one process, C, epoll), else
``--procs`` Python client processes. Then ``--submissions`` sweeps are submitted at once
(one thread each) and the database is checked for every acknowledged id. Prints:

    {"benchmark": "server_load", "concurrency": 50, "rps": …, "p50_ms": …, "p99_ms": …,
     "bare_rps": …, "bare_p99_ms": …, "submissions": 50, "lost": 0, …}

Bounded: ``--duration`` seconds per endpoint (default 5), one run each, and a hard timeout.
The server keeps no worker, so nothing but the load runs on the machine's cores; the aim is
status ≥ 50 % of the bare endpoint's throughput and no lost submission.
Run: ``python benchmarks/server_load.py --duration 5``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BARE_APP = '''
from fastapi import FastAPI
app = FastAPI()
BODY = {"id": 1, "status": "running", "progress": {"fraction": 0.5}}

@app.get("/bare")
async def bare():
    return BODY
'''


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    import httpx
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def seed(db: str) -> tuple[int, str, str]:
    """A running sweep with 2 widths × 8 trials, reports and decisions; returns (sweep id,
    token, the tiny config as YAML for the submissions)."""
    import yaml

    from mutune.config import load_config
    from mutune.services.server.auth import create_token
    from mutune.services.store import Store

    d = load_config("configs/mlp-digits.yaml").model_dump(mode="json")
    d.update(widths=[16, 32], name="bench")
    d["model"]["base_width"] = 16
    d["search"]["num_samples"] = 8
    d["cost"]["project"] = "bench"
    with Store.open(db) as store:
        sid = store.sweep_started(d, 0, {"benchmark": "server_load"})
        seq = 1
        for width in (16, 32):
            ps = store.proxy_sweep_started(sid, width, {"scheduler": "asha"})
            for k in range(8):
                tid = store.trial_started(sid, ps, "proxy", f"w{width}-{k}", width,
                                          {"lr": 10 ** (-4 + k * 0.4)}, k)
                for step in (20, 60, 180):
                    store.trial_reported(tid, step, {"val_loss": 2.0 / (1 + k) + 60 / step},
                                         seq)
                    seq += 1
                store.scheduler_decided(tid, 20, 1.0, 1.1, "continue", seq)
                seq += 1
                store.trial_finished(tid, "completed", None, {"allocated_s": 3.0})
        token = create_token(store, "bench")[1]
    return sid, token, yaml.safe_dump(d)


def wrk(url: str, seconds: float, conns: int, headers: dict[str, str]) -> dict[str, float]:
    """Run wrk: requests/s and p50/p99 latency in ms."""
    cmd = ["wrk", f"-t{min(2, conns)}", f"-c{conns}", f"-d{max(int(seconds), 1)}s",
           "--latency", "--timeout", "10s"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True,
                         timeout=seconds + 60).stdout
    unit = {"us": 1e-3, "ms": 1.0, "s": 1e3}

    def pct(p: str) -> float:
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        return float(m.group(1)) * unit[m.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50_ms": pct("50"), "p99_ms": pct("99"),
            "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(1).strip() if errors else None}


def _client_proc(url: str, seconds: float, conns: int, headers: dict, q: mp.Queue) -> None:
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(url)
    lat: list[float] = []
    bad = [0]
    stop = time.monotonic() + seconds

    def loop() -> None:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        while time.monotonic() < stop:
            t = time.perf_counter()
            c.request("GET", u.path, headers=headers)
            r = c.getresponse()
            r.read()
            lat.append((time.perf_counter() - t) * 1e3)
            bad[0] += r.status != 200
    threads = [threading.Thread(target=loop) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put((lat, bad[0]))


def py_load(url: str, seconds: float, conns: int, headers: dict, procs: int) -> dict:
    """``procs`` client processes sharing ``conns`` keep-alive connections."""
    q: mp.Queue = mp.Queue()
    per = [conns // procs + (i < conns % procs) for i in range(procs)]
    ps = [mp.Process(target=_client_proc, args=(url, seconds, n, headers, q)) for n in per]
    for p in ps:
        p.start()
    lat: list[float] = []
    bad = 0
    for _ in ps:
        a, b = q.get(timeout=seconds + 60)
        lat += a
        bad += b
    for p in ps:
        p.join()
    qs = statistics.quantiles(lat, n=100)
    return {"rps": len(lat) / seconds, "p50_ms": qs[49], "p99_ms": qs[98], "non_2xx": bad,
            "socket_errors": None}


def submit_all(url: str, token: str, body: str, n: int) -> tuple[list[int], int]:
    """``n`` submissions at once, one thread each; returns (acknowledged ids, failures)."""
    import httpx
    ids: list[int] = []
    failed = [0]
    lock = threading.Lock()
    go = threading.Event()

    def one() -> None:
        go.wait()
        try:
            r = httpx.post(url, content=body, timeout=60,
                           headers={"Authorization": f"Bearer {token}",
                                    "Content-Type": "application/yaml"})
            with lock:
                if r.status_code == 201:
                    ids.append(r.json()["id"])
                else:
                    failed[0] += 1
        except httpx.HTTPError:
            with lock:
                failed[0] += 1
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    return ids, failed[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per endpoint")
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--submissions", type=int, default=50)
    p.add_argument("--procs", type=int, default=4, help="client processes without wrk")
    p.add_argument("--timeout", type=float, default=300.0, help="hard limit, seconds")
    a = p.parse_args()
    signal.signal(signal.SIGALRM, lambda *_: sys.exit("server_load: hard timeout reached"))
    signal.alarm(int(a.timeout))

    tmp = Path(tempfile.mkdtemp(prefix="mutune-load-"))
    db = f"sqlite:///{tmp / 'mutune.db'}"
    sid, token, body = seed(db)
    env = {**os.environ, "MUTUNE_TOKEN_CACHE_S": "5"}
    port, bare_port = _port(), _port()
    (tmp / "bare_app.py").write_text(BARE_APP)
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "mutune.services.cli", "serve", "--no-worker",
             "--port", str(port),
             "--db", db, "--log-level", "warning", "--out", str(tmp / "out")],
            env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(bare_port),
             "--log-level", "warning"], env=env, cwd=tmp, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        status_url = f"http://127.0.0.1:{port}/api/v1/sweeps/{sid}"
        bare_url = f"http://127.0.0.1:{bare_port}/bare"
        _wait(f"http://127.0.0.1:{port}/api/v1/health", procs[0])
        _wait(bare_url, procs[1])
        hdr = {"Authorization": f"Bearer {token}"}
        generator = "wrk" if shutil.which("wrk") else f"python x{a.procs}"

        def drive(url: str) -> dict:
            if generator == "wrk":
                return wrk(url, a.duration, a.concurrency, hdr)
            return py_load(url, a.duration, a.concurrency, hdr, a.procs)
        import httpx
        for url in (status_url, bare_url):      # warm-up: imports, caches, first connection
            for _ in range(20):
                httpx.get(url, headers=hdr, timeout=10).raise_for_status()
        status = drive(status_url)
        bare = drive(bare_url)
        ids, failed = submit_all(f"http://127.0.0.1:{port}/api/v1/sweeps", token, body,
                                 a.submissions)
        from mutune.services.store import Store
        with Store.open(db, upgrade=False) as store:
            queued = {s["id"] for s in store.sweeps_page(project="bench", offset=0,
                                                         limit=10_000)[0]
                      if s["status"] == "queued"}
        lost = a.submissions - len(set(ids) & queued)
        print(json.dumps({
            "benchmark": "server_load", "concurrency": a.concurrency,
            "rps": round(status["rps"], 1), "p50_ms": round(status["p50_ms"], 2),
            "p99_ms": round(status["p99_ms"], 2), "bare_rps": round(bare["rps"], 1),
            "bare_p99_ms": round(bare["p99_ms"], 2), "submissions": a.submissions,
            "lost": lost, "status_to_bare": round(status["rps"] / bare["rps"], 3),
            "non_2xx": status["non_2xx"] + bare["non_2xx"], "submit_failures": failed,
            "duration_s": a.duration, "load_generator": generator, "db": "sqlite",
            "cpus": os.cpu_count()}), flush=True)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
