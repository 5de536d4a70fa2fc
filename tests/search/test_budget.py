"""The budget gate and the scheduler adapter's budget path, driven through their hooks with
real Ray Tune ``Trial`` objects, the real ASHA core and the real driver-side book."""
from __future__ import annotations

import itertools

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from mutune.recording import MemoryRecorder
from mutune.search.schedulers.asha import ASHA
from mutune.search.backends.ray_tune.callback import SweepBook
from mutune.search.budget import BudgetGate
from mutune.search.schedulers.planned_steps import planned_trial_steps
from mutune.search.backends.ray_tune.scheduler_adapter import RayASHA


def _trial(key: str, index: int) -> Trial:
    return Trial("train_trial", config={"point": {"hparams": {"lr": 0.01}, "seed": index,
                                                  "index": index}}, trial_id=key, stub=True)


def _report(step: int, val: float) -> dict:
    return {"step": step, "val_loss": val, "productive_s": 0.01 * step, "eval_s": 0.0}


def test_a_running_trial_finishes_its_rung_once_the_budget_is_exhausted():
    rec = MemoryRecorder()
    core = ASHA(grace_period=3, reduction_factor=3, max_t=27, mode="min")
    book = SweepBook(rec, sweep_id=1, proxy_sweep_id=2, kind="proxy", width=16, max_t=27,
                     devices=1, device_kind="cpu", seq=itertools.count(1), core=core)
    gate = BudgetGate(1.0)
    gate.register(book)
    sched = RayASHA(core, book, "val_loss", gate=gate)
    a, b = _trial("a", 0), _trial("b", 1)
    for t in (a, b):
        book.on_trial_start(0, [], t)
    assert sched.on_trial_result(None, a, _report(3, 1.0)) == TrialScheduler.CONTINUE
    assert gate.admits(0.5, "a probe") and gate.exhausted is None
    assert not gate.admits(10.0, "a huge trial")                # closes the gate for good
    assert "budget of 1 GPU-hours" in gate.exhausted and "a huge trial" in gate.exhausted
    assert not gate.admits(0.0, "anything")
    # between rungs the running trial trains on; at its next rung it stops (it finished it)
    assert sched.on_trial_result(None, a, _report(6, 0.9)) == TrialScheduler.CONTINUE
    assert sched.on_trial_result(None, a, _report(9, 0.8)) == TrialScheduler.STOP
    assert sched.on_trial_result(None, b, _report(3, 0.7)) == TrialScheduler.STOP
    for t in (a, b):
        book.on_trial_complete(0, [], t)
    finished = {e["trial_id"]: e for e in rec.of("trial_finished")}
    ra, rb = book.trials["a"], book.trials["b"]
    assert (finished[ra.trial_id]["status"], finished[ra.trial_id]["reason"]) == \
        ("stopped", "budget exhausted: stopped at rung 9")
    assert finished[rb.trial_id]["reason"] == "budget exhausted: stopped at rung 3"
    assert finished[ra.trial_id]["timing"]["steps"] == 9
    # a trial Ray removed before it started is not recorded at all
    book.on_trial_complete(0, [], _trial("never", 2))
    assert len(rec.of("trial_finished")) == 2


def test_spent_committed_and_estimates():
    rec = MemoryRecorder()
    core = ASHA(grace_period=3, reduction_factor=3, max_t=27, mode="min")
    book = SweepBook(rec, sweep_id=1, proxy_sweep_id=2, kind="proxy", width=16, max_t=27,
                     devices=2, device_kind="cpu", seq=itertools.count(1), core=core)
    gate = BudgetGate(1.0)
    gate.register(book)
    t = _trial("a", 0)
    book.on_trial_start(0, [], t)
    book.record_report(t, {"step": 3, "val_loss": 1.0, "productive_s": 36.0, "eval_s": 0.0})
    # 12 s per step on 2 devices; 6 steps to rung 9 → 144 device-s committed
    assert gate.committed_gpu_hours() == pytest.approx(6 * 12.0 * 2 / 3600)
    assert gate.estimate_gpu_hours(book, 3) == pytest.approx((3 * 12.0 + 2.0) * 2 / 3600)
    assert gate.estimate_gpu_hours(book, 3, scale=4.0, devices=1) == pytest.approx(
        (3 * 12.0 * 4 + 2.0) / 3600)
    assert 0 <= gate.spent_gpu_hours() < 0.01
    with pytest.raises(ValueError, match="must be > 0"):
        BudgetGate(0.0)


@pytest.mark.parametrize("n, kind, expected", [
    (4, "asha", [3, 3, 3, 27]),
    (9, "asha", [3] * 6 + [9, 9, 27]),
    (1, "asha", [27]),
    (9, "hyperband", [3, 3, 27] + [9, 9, 27] + [27, 27, 27]),
])
def test_planned_steps_follow_successive_halving(n, kind, expected):
    steps = planned_trial_steps(n, kind=kind, grace_period=3, reduction_factor=3, max_t=27)
    assert steps == sorted(expected) and len(steps) == n
