"""The sweep budget (SweepBudget) and the scheduler adapter's budget path, driven through
their hooks with real Ray Tune ``Trial`` objects, the real ASHA core and the real driver-side
book."""
from __future__ import annotations

import itertools
from collections import Counter

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from mutune.pipeline.recording import MemoryRecorder
from mutune.search.backends.ray_tune.callback import BookSpec, SweepBook
from mutune.search.backends.ray_tune.scheduler_adapter import RayScheduler
from mutune.search.budget import BudgetAdmission, SweepBudget
from mutune.search.driver import ActionKind, Group, SweepDriver
from mutune.search.schedulers.asha import ASHA
from mutune.search.schedulers.planned_steps import DEFAULT_TRIAL_OVERHEAD_S, planned_trial_steps
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.searchers.simple import FixedSearcher


def _trial(key: str, index: int) -> Trial:
    return Trial("train_trial", config={"point": {"hparams": {"lr": 0.01}, "seed": index,
                                                  "index": index, "key": key}},
                 trial_id=key, stub=True)


def _report(step: int, val: float) -> dict:
    return {"step": step, "val_loss": val, "productive_s": 0.01 * step, "eval_s": 0.0}


def _run(core, gate=None, devices=1, n=2):
    """A book, a driver with ``n`` fixed points (keys a, b, …) and the Ray scheduler adapter,
    as :func:`run_trials` wires them."""
    rec = MemoryRecorder()
    book = SweepBook(rec, BookSpec(sweep_id=1, proxy_sweep_id=2, kind="proxy", width=16,
                                   max_t=27, devices=devices, device_kind="cpu"),
                     control=rec, seq=itertools.count(1))
    driver = SweepDriver([Group("w16", FixedSearcher([{"lr": 0.01}] * n), core, 27,
                                make_point=lambda i, hp: {"hparams": hp, "seed": i,
                                                          "index": i},
                                key_of="abcdefgh".__getitem__)],
                         concurrency=n, admission=None if gate is None
                         else BudgetAdmission(gate, book, core.grace_period))
    book.driver = driver
    if gate is not None:
        gate.register(book)
    return rec, book, driver, RayScheduler(driver, book, "val_loss", "min")


def test_a_running_trial_finishes_its_rung_once_the_budget_is_exhausted():
    core = ASHA(grace_period=3, reduction_factor=3, max_t=27, mode="min")
    gate = SweepBudget(1.0)
    rec, book, driver, sched = _run(core, gate)
    starts = [driver.next_action() for _ in range(2)]
    assert [(a.kind, a.key) for a in starts] == [(ActionKind.START, "a"), (ActionKind.START, "b")]
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
    # the sweep is over once they ended: the gate admits nothing new
    assert driver.next_action().kind is ActionKind.DONE


def test_a_closed_budget_admits_no_new_trial_and_no_promotion():
    core = PromotionASHA(grace_period=3, reduction_factor=2, max_t=27, mode="min")
    gate = SweepBudget(1.0)
    rec, book, driver, sched = _run(core, gate, n=4)
    for _ in range(2):
        act = driver.next_action()
        book.on_trial_start(0, [], _trial(act.key, 0))
    a, b = _trial("a", 0), _trial("b", 1)
    assert sched.on_trial_result(None, a, _report(3, 1.0)) == TrialScheduler.PAUSE
    assert sched.on_trial_result(None, b, _report(3, 0.5)) == TrialScheduler.PAUSE
    assert core.candidate().trial == "b"                      # n = 2, k = 1: promotable
    gate.admits(10.0, "a huge trial")                        # the budget closes
    act = driver.next_action()
    assert act.kind is ActionKind.DONE                       # no promotion, no new trial
    assert {j.trial for j in act.finished} == {"a", "b"}
    assert driver.status("b") == ("stopped", "budget exhausted: stopped at rung 3")


def test_spent_committed_and_estimates():
    core = ASHA(grace_period=3, reduction_factor=3, max_t=27, mode="min")
    gate = SweepBudget(1.0)
    rec, book, driver, sched = _run(core, gate, devices=2)
    driver.next_action()
    t = _trial("a", 0)
    book.on_trial_start(0, [], t)
    book.record_report(t, {"step": 3, "val_loss": 1.0, "productive_s": 36.0, "eval_s": 0.0})
    # 12 s per step on 2 devices; 6 steps to rung 9 → 144 device-s committed
    assert gate.committed_gpu_hours() == pytest.approx(6 * 12.0 * 2 / 3600)
    o = DEFAULT_TRIAL_OVERHEAD_S              # no trial has ended: the assumed overhead
    assert gate.estimate_gpu_hours(book, 3) == pytest.approx((3 * 12.0 + o) * 2 / 3600)
    assert gate.estimate_gpu_hours(book, 3, scale=4.0, devices=1) == pytest.approx(
        (3 * 12.0 * 4 + o) / 3600)
    assert 0 <= gate.spent_gpu_hours() < 0.01
    with pytest.raises(ValueError, match="must be > 0"):
        SweepBudget(0.0)


@pytest.mark.parametrize("n, kind, expected", [
    (4, "asha", [3, 3, 3, 27]),
    (9, "asha", [3] * 6 + [9, 9, 27]),
    (1, "asha", [27]),
    # seed 0 puts 4, 2 and 3 of the first 9 trials in brackets 0, 1, 2 (of weights 9:5:3)
    (9, "hyperband", [3, 3, 3, 27] + [9, 27] + [27, 27, 27]),
])
def test_planned_steps_follow_successive_halving(n, kind, expected):
    steps = planned_trial_steps(n, kind=kind, grace_period=3, reduction_factor=3, max_t=27)
    assert steps == sorted(expected) and len(steps) == n


@pytest.mark.parametrize("seed", [0, 7])
def test_the_plan_weights_hyperbands_brackets_as_the_core_does(seed):
    """r 20, η 3, max_t 200: bracket weights 9:5:3 per cycle of 17, so 170 trials (10 whole
    cycles, whatever the seed) are 90, 50 and 30 in brackets 0, 1, 2 — not round-robin — and
    each bracket halves synchronously from its own first rung (20, 60, 180)."""
    steps = planned_trial_steps(170, kind="hyperband", grace_period=20, reduction_factor=3,
                                max_t=200, seed=seed)
    # bracket 0: 90 → 60 cut at 20, 20 at 60, 7 at 180, 3 to 200; bracket 1: 50 → 34 at 60,
    # 11 at 180, 5 to 200; bracket 2: 30 → 20 at 180, 10 to 200
    assert Counter(steps) == {20: 60, 60: 20 + 34, 180: 7 + 11 + 20, 200: 3 + 5 + 10}


def test_spent_counts_held_segments_not_uptime_and_what_came_before():
    """A trial restored by ``mutune resume`` (started = 0.0 on this clock) counts its recorded
    seconds plus its new segment, not the node's uptime; a paused one (promotion) counts
    only what it held; a trial waiting to be continued counts its recorded seconds; what
    the sweep spent before the interruption is added once."""
    import time as _time

    from mutune.search.backends.trial_record import TrialRecord

    now = _time.monotonic()
    rec = MemoryRecorder()
    book = SweepBook(rec, BookSpec(sweep_id=1, proxy_sweep_id=2, kind="proxy", width=16,
                                   max_t=27, devices=2, device_kind="cpu"),
                     control=rec, seq=itertools.count(1))
    book.trials = {
        "resumed": TrialRecord("r", 1, {}, 0.0, held_s=10.0, segment_start=now - 5.0),
        "paused": TrialRecord("p", 2, {}, now - 500.0, held_s=7.0, segment_start=None),
        "done": TrialRecord("d", 3, {}, now - 600.0, status="completed",
                            timing={"allocated_s": 3.0})}
    book.resumed = {"w": TrialRecord("w", 4, {}, 0.0, held_s=4.0)}
    gate = SweepBudget(1.0)
    gate.register(book)
    held = (10.0 + 5.0 + 7.0 + 3.0 + 4.0) * 2 / 3600.0
    assert gate.spent_gpu_hours() == pytest.approx(held, abs=2 * 0.5 / 3600)
    gate.add_prior(0.25)
    assert gate.spent_gpu_hours() == pytest.approx(0.25 + held, abs=2 * 0.5 / 3600)
    with pytest.raises(ValueError, match="gpu_hours"):
        gate.add_prior(-1.0)


def test_spent_before_a_resume_counts_the_finished_trial_rows_once():
    from mutune.pipeline.resume import spent_before

    rows = {"trials": [
        {"status": "completed", "reason": None, "allocated_s": 360.0, "devices": 1.0},
        {"status": "stopped", "reason": "below", "allocated_s": 36.0, "devices": 0.5},
        {"status": "running", "reason": None, "allocated_s": None, "devices": None},
        {"status": "failed", "reason": "stale: no heartbeat", "allocated_s": 99.0,
         "devices": 1.0}]}
    assert spent_before(rows) == pytest.approx((360.0 + 18.0) / 3600.0)
