"""A local cluster's workers get mutune's environment by inheritance, not as a job runtime_env
(mutune.search.backends.ray_tune.cluster.ray_cluster): the workers Ray prestarts at ray.init
can then serve the sweep's actors instead of each actor waiting for a process of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = r"""
import json, os, sys
from mutune.config import load_config
from mutune.search.backends.ray_tune.cluster import ray_cluster

with ray_cluster(load_config().ray):
    import ray

    @ray.remote(num_cpus=1)
    class Probe:
        def env(self):
            return [os.environ.get(k) for k in ("MALLOC_ARENA_MAX",
                                                "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S")]

    worker, poll = ray.get(Probe.remote().env.remote())
    job = dict(ray.get_runtime_context().runtime_env)
    inside = os.environ.get("MALLOC_ARENA_MAX")
print("RESULT " + json.dumps({"worker": worker, "poll": poll, "job": job, "inside": inside,
                              "after": os.environ.get("MALLOC_ARENA_MAX")}))
"""


def _run(env_value):
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if env_value is not None:
        env["MALLOC_ARENA_MAX"] = env_value
    out = subprocess.run([sys.executable, "-c", DRIVER], cwd=Path(__file__).resolve().parents[3],
                         capture_output=True, text=True, timeout=300, env=env, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.slow
def test_local_workers_inherit_the_environment_and_the_job_has_no_runtime_env():
    from mutune.search.backends.ray_tune.cluster import MALLOC_ARENAS, TRAIN_POLL_ENV

    got = _run(None)
    assert got["worker"] == MALLOC_ARENAS          # the workers' setting reached them
    # and Ray Train's poll interval, which the target run's controller (a worker) reads
    assert got["poll"] == TRAIN_POLL_ENV["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"]
    assert not got["job"].get("env_vars")          # not as a runtime_env
    assert got["inside"] is None and got["after"] is None   # the driver's own env unchanged
    got = _run("4")                                # a user's value is kept everywhere
    assert got["worker"] == "4" and got["after"] == "4" and not got["job"].get("env_vars")


def test_importing_ahead_imports_by_the_block_s_end_and_drops_a_failure():
    code = r"""
import sys
from mutune.search.backends.ray_tune.import_ahead import importing_ahead
with importing_ahead("colorsys"):
    pass
with importing_ahead("mutune_no_such_module"):
    pass
print("colorsys" in sys.modules, "mutune_no_such_module" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_a_poll_interval_the_user_set_is_kept(monkeypatch):
    from mutune.search.backends.ray_tune.cluster import TRAIN_POLL_ENV, worker_env

    (name, value), = TRAIN_POLL_ENV.items()
    monkeypatch.delenv(name, raising=False)
    assert worker_env()[name] == value == "0.1"
    monkeypatch.setenv(name, "1.5")             # the user's own: inherited, not overridden
    assert name not in worker_env()
