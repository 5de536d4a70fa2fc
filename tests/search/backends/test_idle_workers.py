"""Trial actors start in Ray's idle workers where the workers' own environment already holds
what Ray Tune would put in their runtime_env (mutune._internals.use_idle_workers),
and keep Tune's runtime_env everywhere else."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from mutune.search.backends.ray_tune.cluster import TUNE_ACTOR_ENV, worker_env
from mutune._internals import tune_actor_env, use_idle_workers

REPO = Path(__file__).resolve().parents[3]


class _Trainable:
    pass


def _controller():
    from ray.tune.execution.class_cache import _ActorClassCache

    return SimpleNamespace(_class_cache=_ActorClassCache())


def _trial(cls=_Trainable):
    return SimpleNamespace(get_trainable_cls=lambda: cls)


def _runtime_env(actor_cls):
    return actor_cls._default_options.get("runtime_env")


def _no_passed_on_variables(monkeypatch):
    """This process without the variables Ray Tune passes on to trial actors."""
    from ray.tune.execution.class_cache import ENV_VARS_TO_PROPAGATE

    for name in ENV_VARS_TO_PROPAGATE:
        monkeypatch.delenv(name, raising=False)


def test_tune_actor_env_is_what_tune_puts_in_a_trial_actors_runtime_env(monkeypatch):
    from ray.tune.execution.class_cache import _ActorClassCache

    _no_passed_on_variables(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key-of-the-driver")
    got = tune_actor_env()
    assert got == _runtime_env(_ActorClassCache().get(_Trainable))["env_vars"]
    assert got["AWS_ACCESS_KEY_ID"] == "key-of-the-driver"
    # the local cluster's workers get Tune's defaults from mutune (cluster.worker_env)
    assert TUNE_ACTOR_ENV.items() <= worker_env().items()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    assert tune_actor_env() == TUNE_ACTOR_ENV


def test_the_class_without_runtime_env_only_where_the_workers_hold_every_variable(monkeypatch):
    _no_passed_on_variables(monkeypatch)
    workers = {**os.environ, **worker_env()}

    ctl = _controller()                          # unknown workers' environment: Tune's own
    assert not use_idle_workers(ctl, _trial(), None)
    assert _runtime_env(ctl._class_cache.get(_Trainable))

    ctl = _controller()                          # a variable Tune sets is missing there
    assert not use_idle_workers(ctl, _trial(), {"MALLOC_ARENA_MAX": "2"})
    assert not ctl._class_cache._cache

    ctl = _controller()                          # set in the driver after the cluster began
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "set-later")
    assert not use_idle_workers(ctl, _trial(), workers)
    assert _runtime_env(ctl._class_cache.get(_Trainable))["env_vars"][
        "AWS_SECRET_ACCESS_KEY"] == "set-later"
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    ctl = _controller()                          # every variable there: no runtime_env
    assert use_idle_workers(ctl, _trial(), workers)
    assert not _runtime_env(ctl._class_cache.get(_Trainable))
    assert not use_idle_workers(ctl, _trial(), workers)   # made already: left as it is

    ctl = _controller()                          # Tune made its class first: it stays
    tune_made = ctl._class_cache.get(_Trainable)
    assert not use_idle_workers(ctl, _trial(), workers)
    assert ctl._class_cache.get(_Trainable) is tune_made

    assert not use_idle_workers(SimpleNamespace(), _trial(), workers)   # no class cache
    assert not use_idle_workers(_controller(), _trial(None), workers)   # no trainable


DRIVER = r"""
import itertools, json, os, sys, time, tempfile
from pathlib import Path

import psutil

from mutune.config import load_config, parse_config
from mutune.pipeline.recording import MemoryRecorder
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.search.backends.ray_tune.cluster import local_worker_env, ray_cluster
from tests.search.runs import run_trials
from mutune.search.searchers import make_searcher
from mutune.search.searchers.space import trial_seeds

d = load_config("configs/mlp-digits.yaml").model_dump(mode="json")
d["model"].update(family="mlp", base_width=16)
d["widths"] = [16, 32]
d["target"]["width"] = 64
d["search"].update(num_samples=2, searcher="random")
d["train"].update(eval_every=3)
d["search"]["scheduler"].update(kind="asha", variant="stopping", grace_period=3,
                                reduction_factor=3, max_t=9)
d["ray"].update(num_cpus=2, cpus_per_trial=1, max_concurrent_trials=None)
cfg = parse_config(d)
task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()


def idle():
    return {p.pid for p in psutil.Process().children(recursive=True)
            if p.name().startswith("ray::IDLE")}


with ray_cluster(cfg.ray), tempfile.TemporaryDirectory() as tmp:
    started = local_worker_env() is not None
    waited_from = time.monotonic()
    while len(idle()) < 2 and time.monotonic() - waited_from < 120:
        time.sleep(0.1)
    before = idle()
    if sys.argv[1] == "later":      # a variable Tune passes on, set after the cluster began
        os.environ["AWS_SECRET_ACCESS_KEY"] = "set-later"
    out = run_trials(None, task=task, width=16, max_t=9, recorder=MemoryRecorder(),
                     sweep_id=1, proxy_sweep_id=1, kind="proxy",
                     scheduler=cfg.search.scheduler, metric="val_loss", mode="min",
                     ray_cfg=cfg.ray, storage=Path(tmp), name="idle", seq=itertools.count(1),
                     searcher=make_searcher(cfg.search, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, 2))
    pids = sorted({t.reports[-1]["worker_pid"] for t in out.trials})
ended = local_worker_env() is None
print("RESULT " + json.dumps({"idle": sorted(before), "actors": pids, "started": started,
                              "ended": ended, "status": [t.status for t in out.trials]}))
"""


def _drive(mode):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("PL_DISABLE_FORK",)}
    out = subprocess.run([sys.executable, "-c", DRIVER, mode], cwd=REPO, capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.slow
def test_trial_actors_start_in_the_workers_ray_started_idle():
    got = _drive("same")
    assert got["started"] and got["ended"]       # the cluster's environment, while it ran
    assert len(got["idle"]) == 2 and len(got["actors"]) == 2
    assert set(got["actors"]) <= set(got["idle"])    # no new process for a trial actor
    assert set(got["status"]) <= {"completed", "stopped"}


@pytest.mark.slow
def test_a_variable_set_after_the_cluster_began_keeps_tunes_runtime_env():
    got = _drive("later")
    assert len(got["idle"]) == 2 and got["actors"]
    assert not set(got["actors"]) & set(got["idle"])  # processes started with Tune's env
