"""benchmarks/ettr.py splits the held CPU-seconds that did not train from the workers' own
clocks: the trials of each actor laid end to end (synthetic records, no Ray)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ettr():
    spec = importlib.util.spec_from_file_location("ettr_bench", REPO / "benchmarks" / "ettr.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trial(pid, began, wall, productive, evals, setup):
    reports = [{"worker_pid": pid, "began_at": began, "wall_s": wall / 2, "setup_s": setup},
               {"worker_pid": pid, "began_at": began, "wall_s": wall, "setup_s": setup}]
    return SimpleNamespace(reports=reports, timing={"productive_s": productive,
                                                    "eval_s": evals, "checkpoint_s": 0.0})


def test_the_parts_sum_to_the_overhead_and_land_where_they_happened():
    where = _ettr().where
    called = 100.0
    trials = [_trial(1, 103.0, 2.0, 1.0, 0.1, 0.5),     # actor 1: starts 3 s after the call
              _trial(1, 105.2, 1.0, 0.8, 0.1, 0.0),     # 0.2 s after the first's last report
              _trial(2, 104.0, 1.5, 1.2, 0.1, 0.1)]     # actor 2: starts 4 s after the call
    wall, cpus = 7.0, 2
    out = where(trials, called_at=called, wall=wall, cpus=cpus)
    tot = out["where_total_s"]
    assert out["actors"] == 2
    assert tot["run_start"] == pytest.approx(3.0 + 4.0)
    assert tot["first_setup"] == pytest.approx(0.5 + 0.1) and tot["setup"] == 0.0
    assert tot["between_trials"] == pytest.approx(0.2)
    assert tot["run_end"] == pytest.approx((107.0 - 106.2) + (107.0 - 105.5))
    assert tot["eval"] == pytest.approx(0.3) and tot["unused_slots"] == 0.0
    productive = sum(t.timing["productive_s"] for t in trials)
    assert sum(tot.values()) == pytest.approx(wall * cpus - productive)
    assert sum(out["where"].values()) == pytest.approx((wall * cpus - productive) / 3)


def test_a_slot_no_actor_held_is_counted_whole():
    out = _ettr().where([_trial(7, 101.0, 1.0, 0.5, 0.0, 0.0)], called_at=100.0, wall=3.0,
                        cpus=2)
    assert out["where_total_s"]["unused_slots"] == pytest.approx(3.0)
    assert sum(out["where_total_s"].values()) == pytest.approx(3.0 * 2 - 0.5)
