"""A trial holds back the reports no decision waits for (mutune.search.trial.report_hold): which
reports wait and for how long (a test clock), the steps the driver hands the trial, the
config's cap, and on a real Ray cluster at concurrency 1 the same records and decisions with
holding off, on, and on with ``decide_at`` wrong (the driver stops trials at held reports)."""
from __future__ import annotations

import dataclasses
import itertools
import math
import sys

import pytest
from ray.tune import Callback

from mutune.config import RayConfig
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.search.driver.types import Group
from mutune.search.schedulers import make_scheduler
from mutune.search.trial.report_hold import HELD_KEY, ReportHold


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _m(step: int, loss: float = 1.0) -> dict:
    return {"step": step, "val_loss": loss, "productive_s": 0.1 * step}


def test_reports_between_decisions_wait_and_travel_in_order_with_the_next():
    clock = _Clock()
    hold = ReportHold([9, 27], hold_s=1.0, clock=clock)
    assert not hold.hold(_m(2), False)           # a start's first report: sent at once
    assert HELD_KEY not in hold.sending(_m(2))
    assert hold.hold(_m(3), False) and hold.hold(_m(6), False)
    assert not hold.hold(_m(9), False)           # a rung milestone: sent at once
    sent = hold.sending(_m(9))
    assert [r["step"] for r in sent[HELD_KEY]] == [3, 6] and hold.held == []
    clock.now += 0.5
    assert hold.hold(_m(12), False)
    clock.now += 0.6                              # 1.1 s since the last report sent
    assert not hold.hold(_m(15), False)
    assert [r["step"] for r in hold.sending(_m(15))[HELD_KEY]] == [12]
    assert HELD_KEY not in hold.sending(_m(18))   # nothing held: sent unchanged


def test_the_first_report_past_a_milestone_is_sent_when_reports_skip_it():
    hold = ReportHold([20, 60], hold_s=5.0, clock=_Clock())
    assert not hold.hold(_m(5), False)
    hold.sending(_m(5))
    assert hold.hold(_m(15), False)
    assert not hold.hold(_m(30), False)           # the rung at 20 judges this report
    hold.sending(_m(30))
    assert hold.hold(_m(45), False)
    assert not hold.hold(_m(75), False)


@pytest.mark.parametrize("metrics,checkpointed", [
    (_m(4), True),                                    # a checkpoint goes to Ray at once
    ({**_m(4), "val_loss": math.nan}, False),         # divergence: judged at once
    ({**_m(4), "train_loss": math.inf}, False),
    ({**_m(4), "preempted": 1.0}, False),             # the driver retries it from here
])
def test_checkpoints_non_finite_numbers_and_preemptions_are_never_held(metrics, checkpointed):
    hold = ReportHold([27], hold_s=5.0, clock=_Clock())
    assert not hold.hold(_m(2), False)     # the first report
    hold.sending(_m(2))
    assert not hold.hold(metrics, checkpointed)


def test_hold_zero_sends_everything_and_a_bad_hold_names_itself():
    assert not ReportHold([27], hold_s=0.0).hold(_m(3), False)
    with pytest.raises(ValueError, match="hold_s = -1"):
        ReportHold([27], hold_s=-1)


def test_flush_sends_the_newest_held_report_with_the_older_ones():
    hold = ReportHold([27], hold_s=5.0, clock=_Clock())
    assert hold.flush() is None
    assert not hold.hold(_m(1), False)
    for s in (3, 6, 9):
        assert hold.hold(_m(s), False)
    out = hold.flush()
    assert out["step"] == 9 and [r["step"] for r in out[HELD_KEY]] == [3, 6]
    assert hold.held == [] and hold.flush() is None


def test_decision_steps_are_the_rungs_the_divergence_limits_and_max_t():
    core = make_scheduler("hyperband", grace_period=3, reduction_factor=3, max_t=27, seed=0)
    g = Group("w16", searcher=None, core=core, max_t=27, diverge_above={12: 2.0})
    assert g.decision_steps() == [3, 9, 12, 27]
    assert Group("target", searcher=None, core=None, max_t=50).decision_steps() == [50]


def test_the_hold_is_capped_by_the_zombie_timeout_and_checked():
    assert RayConfig().report_hold_window() == 1.0
    assert RayConfig(zombie_timeout_s=2.0).report_hold_window() == 0.5
    assert RayConfig(zombie_timeout_s=8.0, start_timeout_s=1.0).report_hold_window() == 0.25
    for bad in (-0.5, math.inf):
        with pytest.raises(ValueError, match="report_hold_s"):
            RayConfig(report_hold_s=bad)


class _CountHeld(Callback):
    def __init__(self) -> None:
        self.held = 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.held += len(result.get(HELD_KEY) or ())


def _sweep(cfg, tmp_path, name, hold_s):
    from mutune.pipeline.recording import MemoryRecorder
    from tests.search.runs import run_trials
    from mutune.search.searchers import make_searcher
    from mutune.search.searchers.space import trial_seeds

    ray_cfg = cfg.ray.model_copy(update={"max_concurrent_trials": 1, "report_hold_s": hold_s})
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    rec, counter = MemoryRecorder(), _CountHeld()
    out = run_trials(None, task=task, width=16, max_t=27, recorder=rec, sweep_id=1,
                     proxy_sweep_id=2, kind="proxy", scheduler=cfg.search.scheduler,
                     metric="val_loss", mode="min", ray_cfg=ray_cfg, storage=tmp_path / name,
                     name=name, seq=itertools.count(1), scheduler_seed=0,
                     searcher=make_searcher(cfg.search, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, cfg.search.num_samples),
                     callbacks=[counter])
    key_of = {t.trial_id: t.key for t in out.trials}
    reports = [(key_of[e["trial_id"]], e["step"], e["metrics"]["val_loss"])
               for e in sorted(rec.of("trial_reported"), key=lambda e: e["seq"])]
    decisions = [(key_of[d["trial_id"]], d["milestone"], d["decision"])
                 for d in sorted(rec.of("scheduler_decided"), key=lambda d: d["seq"])]
    statuses = sorted((t.key, t.status, t.last_step) for t in out.trials)
    return reports, decisions, statuses, counter.held


@pytest.mark.slow
def test_held_reports_leave_records_and_decisions_unchanged_even_with_wrong_steps(
        ray_local, tiny_config, tmp_path, monkeypatch):
    # an evaluation every step: the first report (step 1) is always sent, the rung at 3 judges
    # a held one when decide_at is wrong
    cfg = tiny_config.model_copy(update={
        "search": tiny_config.search.model_copy(update={"num_samples": 9, "searcher": "random"}),
        "train": tiny_config.train.model_copy(update={"eval_every": 1})})
    sent = _sweep(cfg, tmp_path, "sent", 0.0)
    held = _sweep(cfg, tmp_path, "held", 60.0)
    # the driver hands every trial max_t alone: the rungs at 3 and 9 judge held reports
    monkeypatch.setattr(Group, "decision_steps", lambda self: [self.max_t])
    wrong = _sweep(cfg, tmp_path, "wrong", 60.0)
    assert sent[3] == 0 and held[3] > 0 and wrong[3] > held[3]
    # trials stopped at the rung of step 3: with decide_at wrong, at a held report
    assert any(m == 3 and d == "stop" for _, m, d in sent[1])
    for run in (held, wrong):
        assert run[:3] == sent[:3]      # reports (values, order), decisions, how each ended


@dataclasses.dataclass(frozen=True)
class BreakingTask(ProxyTask):
    """The real task, except that fetching the batch of step ``break_at`` raises (a data
    loader that broke between two evaluations)."""
    break_at: int = -1

    def batch(self, seed: int, step: int):
        if step == self.break_at:
            raise RuntimeError(f"the data loader broke at step {step}")
        return super().batch(seed, step)


@pytest.mark.slow
def test_a_trial_that_raises_sends_what_it_held_first(ray_local, tiny_config, tmp_path):
    import ray.cloudpickle

    from mutune.pipeline.recording import MemoryRecorder
    from tests.search.runs import run_trials

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers get the class
    base = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    # decisions at max_t only (no scheduler): after the first report (3), those at 6, 9
    # and 12 are held
    task = BreakingTask(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)
                           if f.init}, break_at=14)
    point = {"hparams": {"lr": 0.01, **tiny_config.search.fixed}, "seed": 5, "index": 0}
    ray_cfg = tiny_config.ray.model_copy(update={"max_failures": 0, "report_hold_s": 60.0})
    rec, counter = MemoryRecorder(), _CountHeld()
    out = run_trials([point], task=task, width=16, max_t=27, recorder=rec, sweep_id=1,
                     proxy_sweep_id=None, kind="target", scheduler=None, metric="val_loss",
                     mode="min", ray_cfg=ray_cfg, storage=tmp_path, name="breaks",
                     seq=itertools.count(1), callbacks=[counter])
    (t,) = out.trials
    assert t.status == "failed"
    assert [e["step"] for e in rec.of("trial_reported")] == [3, 6, 9, 12]
    assert counter.held == 2          # 6 and 9 travelled with 12
    logs = rec.of("trial_logged")
    assert logs and "the data loader broke at step 14" in (logs[-1].get("traceback") or "")


def test_a_resume_skips_checkpoints_past_the_last_recorded_step(tmp_path):
    """A driver that died after Ray stored a report's checkpoint but before it recorded that
    report (or the reports held back before it) left a checkpoint past its last recorded
    step: a resume restores from the newest one at or before that step instead."""
    import torch

    from mutune.search.trial.checkpoint import latest_checkpoint, save_trial_state

    for i, step in enumerate((6, 12)):
        save_trial_state(tmp_path / f"checkpoint_{i:06d}", {"step": step, "w": torch.ones(2)})
    assert latest_checkpoint(tmp_path).endswith("checkpoint_000001")
    assert latest_checkpoint(tmp_path, at_most=12).endswith("checkpoint_000001")
    assert latest_checkpoint(tmp_path, at_most=9).endswith("checkpoint_000000")
    assert latest_checkpoint(tmp_path, at_most=3) is None


def test_a_resumed_trial_carries_its_last_recorded_step(tmp_path):
    """:func:`~mutune.pipeline.recorded.continue_points` picks the local checkpoint at or
    before the trial's last recorded step and hands that step on (``restore_at_most``) for
    the remote tier, which the trial falls back to where the folder is not on its node."""
    import torch

    from mutune.pipeline.recorded import continue_points
    from mutune.search.backends.trial_record import TrialRecord
    from mutune.search.trial.checkpoint import save_trial_state
    from mutune.search.trial.remote_trial import CONTINUE

    for i, step in enumerate((6, 12)):
        save_trial_state(tmp_path / f"checkpoint_{i:06d}", {"step": step, "w": torch.ones(2)})
    point = {"hparams": {"lr": 0.1}, "seed": 0, "index": 0}
    running = TrialRecord("w16-t0", 1, point, 0.0, reports=[{"step": 3}, {"step": 9}])
    elsewhere = TrialRecord("w16-t1", 2, point, 0.0, reports=[{"step": 3}])
    done = TrialRecord("w16-t2", 3, point, 0.0, reports=[{"step": 27}], status="completed")
    rows = [{"id": 1, "checkpoint_dir": str(tmp_path)}, {"id": 2, "checkpoint_dir": None},
            {"id": 3, "checkpoint_dir": None}]
    left, ended, points = continue_points([running, elsewhere, done], rows)
    assert [r.key for r in left] == ["w16-t0", "w16-t1"] and ended == [done]
    assert points[0]["restore_from"].endswith("checkpoint_000000")
    assert points[0]["restore_at_most"] == 9
    assert (points[1]["restore_from"], points[1]["restore_at_most"]) == (CONTINUE, 3)

