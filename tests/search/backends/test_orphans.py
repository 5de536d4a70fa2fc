"""No orphans: a driver killed with SIGKILL leaves Ray agents running (re-parented to init);
the next local cluster mutune starts ends them and says so, and never touches a cluster whose
driver is alive."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mutune.search.backends.ray_tune import orphans

DRIVER = r"""
import time
from mutune.config import load_config
from mutune._internals import session_dir
from mutune.search.backends.ray_tune.cluster import ray_cluster

with ray_cluster(load_config().ray):
    import ray

    ray.get(ray.remote(lambda: 1).remote())       # a worker, as a sweep starts them
    print("SESSION " + session_dir(), flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_the_next_start_ends_what_a_killed_driver_left(tmp_path, monkeypatch):
    monkeypatch.setenv(orphans.STATE_ENV, str(tmp_path / "state"))
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=root, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        session = None
        for line in proc.stdout:
            if line.startswith("SESSION "):
                session = line.split(" ", 1)[1].strip()
                break
        assert session, "the driver did not start its cluster"
        (entry,) = orphans.registry_dir().glob("*.json")
        assert json.loads(entry.read_text())["driver_pid"] == proc.pid
        assert orphans.reap_orphans() == []          # its driver is alive: untouched
        assert orphans.cluster_processes(session)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # what Ray leaves on its own after its driver's SIGKILL (agents ignoring SIGTERM)
    orphans.wait_gone(session, 5.0)
    left = orphans.cluster_processes(session)
    assert left, "Ray's agents are expected to outlive a SIGKILLed driver"
    (found,) = orphans.reap_orphans()
    assert found["driver_pid"] == proc.pid and found["session_dir"] == session
    assert {p["pid"] for p in found["ended"]} == {p.pid for p in left}
    assert orphans.wait_gone(session, 10.0)
    assert not list(orphans.registry_dir().glob("*.json"))


def test_a_live_driver_is_never_reaped_and_a_dead_ones_entry_is_removed(tmp_path,
                                                                       monkeypatch):
    import psutil

    monkeypatch.setenv(orphans.STATE_ENV, str(tmp_path))
    mine = orphans.register(str(tmp_path / "session_mine"))
    # a dead driver (a PID whose start time does not match) with nothing left running
    dead = orphans.registry_dir() / "1-session_dead.json"
    dead.write_text(json.dumps({"driver_pid": os.getpid(),
                                "driver_started": psutil.Process().create_time() - 1000,
                                "session_dir": str(tmp_path / "session_dead")}))
    (orphans.registry_dir() / "junk.json").write_text("{not json")
    found = orphans.reap_orphans(grace_s=0.1)
    assert found == [{"driver_pid": os.getpid(), "session_dir": str(tmp_path / "session_dead"),
                      "ended": []}]
    assert [p.name for p in orphans.registry_dir().glob("*.json")] == [mine.name]
    orphans.unregister(mine)
    assert not list(orphans.registry_dir().glob("*.json"))
