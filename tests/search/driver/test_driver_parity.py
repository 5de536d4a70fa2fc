"""One driver loop for every backend: at concurrency 1 a real Ray Tune sweep with TPE and the
simulator fed the same curves give the searcher the same ask/observe/tell log — stopped trials
included (Ray itself never calls a searcher's ``on_trial_result`` after it stopped a trial) —
and the scheduler core the same calls.

Also checked here: the Ray adapters only translate (no decision logic of their own)."""
from __future__ import annotations

import ast
import itertools
import math
import sys
from pathlib import Path

import pytest

from mutune.config import RayConfig, SchedulerConfig, SearchConfig
from mutune.search.backends.simulated import simulate
from mutune.search.schedulers import make_scheduler
from mutune.search.searchers import TPESearcher

MAX_T, EVERY = 27, 3


def _curve(hp: dict, step: int) -> float:
    """A bowl in log lr around 1e-2 that flattens with steps (stopped trials are common)."""
    return (math.log10(hp["lr"]) + 2.0) ** 2 + 1.0 / math.sqrt(step)


def curve_trainable(config: dict) -> None:
    """A Ray function trainable reporting :func:`_curve` of its point every ``EVERY`` steps."""
    from ray import tune

    hp = config["point"]["hparams"]
    for step in range(EVERY, MAX_T + 1, EVERY):
        tune.report({"step": step, "val_loss": _curve(hp, step)})


def _search(n: int) -> SearchConfig:
    return SearchConfig(num_samples=n, searcher="tpe",
                        space={"lr": {"type": "loguniform", "low": 1e-5, "high": 1e-1}})


def _normalized(events: list) -> list[tuple]:
    """The searcher's log with keys renamed by first appearance (backends name trials their
    own way: ``t0`` in the simulator, ``w16-t0`` under Ray)."""
    names: dict[str, str] = {}
    out = []
    for ev in events:
        key = names.setdefault(ev[1], f"#{len(names)}")
        out.append((ev[0], key, *ev[2:]))
    return out


def _core_calls(log: list) -> list[tuple]:
    """The driver's log of core calls without group names, keys renamed as above."""
    keyed = [(e[0], e[2], *e[3:]) for e in log if e[0] != "finish"]
    ends = sum(e[0] == "finish" for e in log)
    return _normalized(keyed) + [("finish",)] * ends


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["asha", "hyperband"])
def test_ray_and_simulator_tell_the_searcher_the_same_things(ray_local, tmp_path, kind):
    import ray.cloudpickle

    from mutune.pipeline.recording import MemoryRecorder
    from tests.search.runs import run_trials

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers get the curve
    n = 12
    sched = SchedulerConfig(kind=kind, grace_period=3, reduction_factor=3, max_t=MAX_T)

    def core():
        return make_scheduler(kind, grace_period=3, reduction_factor=3, max_t=MAX_T, seed=0)

    sim_tpe = TPESearcher(_search(n), 0, 0, n_startup_trials=4)
    sim = simulate(core(), _curve, searcher=sim_tpe, concurrency=1, max_t=MAX_T,
                   report_every=EVERY)

    ray_tpe = TPESearcher(_search(n), 0, 0, n_startup_trials=4)
    rec = MemoryRecorder()
    out = run_trials(None, task=None, width=16, max_t=MAX_T, recorder=rec, sweep_id=1,
                     proxy_sweep_id=1, kind="proxy", scheduler=sched, metric="val_loss",
                     mode="min", ray_cfg=RayConfig(num_cpus=2, max_concurrent_trials=1),
                     storage=tmp_path, name="parity", seq=itertools.count(1),
                     searcher=ray_tpe, seeds=list(range(n)), trainable=curve_trainable)

    sim_log = _normalized(sim_tpe.state_dict()["events"])
    ray_log = _normalized(ray_tpe.state_dict()["events"])
    assert ray_log == sim_log
    statuses = [e[2] for e in sim_log if e[0] == "complete"]
    assert "stopped" in statuses and "completed" in statuses
    # every stopped trial's stopping report reached the searcher (its last observe)
    for key in {e[1] for e in sim_log if e[0] == "complete" and e[2] == "stopped"}:
        observed = [e for e in ray_log if e[0] == "observe" and e[1] == key]
        assert observed, f"stopped trial {key} was never observed"
    # the same calls reached the scheduler core, and the same statuses were recorded
    assert _core_calls(out.driver.core_log) == _core_calls(sim.driver.core_log)
    assert sorted(t.status for t in out.trials) == sorted(sim.statuses.values())
    assert len(rec.of("trial_finished")) == n


ADAPTERS = Path(__file__).resolve().parents[3] / "mutune/search/backends/ray_tune"
#: what deciding looks like: calling a scheduler core's or a searcher's own methods
DECIDING = {"on_report", "candidate", "promote", "finish", "suggest", "observe", "complete",
            "admits", "admit"}


@pytest.mark.parametrize("module", ["scheduler_adapter.py", "searcher_adapter.py"])
def test_the_ray_adapters_only_translate(module):
    """The adapters call the driver (``next_action``, ``report``) and the book, never a
    scheduler core, a searcher or the budget directly, and compare no metric values."""
    tree = ast.parse((ADAPTERS / module).read_text(encoding="utf-8"))
    calls = {n.func.attr for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert not calls & DECIDING, f"{module} decides: calls {sorted(calls & DECIDING)}"
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not attrs & {"core", "proposer", "searcher", "gate"}, sorted(attrs)
    compares = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)
                and any(isinstance(op, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for op in n.ops)]
    assert not compares, f"{module} compares values at line {compares[0].lineno}"
