"""The search engine on a real local Ray cluster (slow): promotion ASHA pausing and resuming
trials from their checkpoints with the TPE searcher, and a SIGKILLed trial retried from its last
checkpoint with bit-identical losses. Tiny MLP (width 16, 27 steps)."""
from __future__ import annotations

import itertools
import os
import signal

import pytest
from ray.tune import Callback

from mutune.proxies.task import ProxyTask, load_task_data
from mutune.pipeline.recording import MemoryRecorder
from mutune.search.schedulers.asha import Decision
from mutune.search.searchers import make_searcher
from mutune.search.searchers.space import trial_seeds
from mutune.training import run_loop
from mutune.search.backends.groups import make_core
from tests.search.runs import run_trials

pytestmark = pytest.mark.slow


def _task(cfg):
    return ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()


def _replayed(core, reports, decisions, key_of):
    """Feed the recorded reports and promotions, in sequence order, to a fresh core."""
    events = sorted([(e["seq"], "report", e) for e in reports]
                    + [(d["seq"], "promote", d) for d in decisions
                       if d["decision"] == "promote"], key=lambda x: x[0])
    out = []
    for _, what, e in events:
        key = key_of[e["trial_id"]]
        if what == "report":
            if core.ended(key) is None:
                out += core.on_report(key, e["step"], e["metrics"]["val_loss"])
        else:
            out.append(core.promote(key))
    out += core.finish()
    return [(j.trial, j.milestone, j.decision.value) for j in out]


def test_promotion_asha_with_tpe_pauses_resumes_from_checkpoints_and_ends_clean(
        ray_local, tiny_config, tmp_path):
    cfg = tiny_config.model_copy(update={"search": tiny_config.search.model_copy(update={
        "num_samples": 6, "searcher": "tpe",
        # rungs 9 and 27: of the first 3 at rung 9 the best is promoted (⌊3/3⌋ = 1)
        "scheduler": tiny_config.search.scheduler.model_copy(update={"variant": "promotion",
                                                                      "grace_period": 9})}),
        "ray": tiny_config.ray.model_copy(update={"heartbeat_s": 0.05, "lease_s": 0.5})})
    rec = MemoryRecorder()
    out = run_trials(None, task=_task(cfg), width=16, max_t=27, recorder=rec, sweep_id=1,
                     proxy_sweep_id=2, kind="proxy", scheduler=cfg.search.scheduler,
                     metric="val_loss", mode="min", ray_cfg=cfg.ray, storage=tmp_path,
                     name="promo", seq=itertools.count(1), scheduler_seed=0,
                     searcher=make_searcher(cfg.search, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, 6))
    assert len(out.trials) == 6 and out.core.paused() == {}
    assert {t.status for t in out.trials} <= {"completed", "stopped"}
    decisions = rec.of("scheduler_decided")
    kinds = [d["decision"] for d in decisions]
    assert "pause" in kinds and "promote" in kinds and "completed" in {t.status for t in
                                                                        out.trials}
    key_of = {t.trial_id: t.key for t in out.trials}
    for t in out.trials:
        steps = [r["step"] for r in t.reports]
        # resumed exactly where it paused: every evaluation step once, none skipped
        assert steps == list(range(3, t.last_step + 1, 3))
        pauses = [d["milestone"] for d in decisions
                  if d["trial_id"] == t.trial_id and d["decision"] == "pause"]
        promos = [d["milestone"] for d in decisions
                  if d["trial_id"] == t.trial_id and d["decision"] == "promote"]
        assert promos == pauses[:len(promos)]
        for m in promos:   # the first report after a promotion resumed from that rung
            after = next(r for r in t.reports if r["step"] > m)
            assert after["restored_step"] == m
        if t.status == "stopped":
            assert len(pauses) == len(promos) + 1    # stopped while paused, by finish()
        assert t.timing["resumes"] == len(promos)
    seqs = sorted(e["seq"] for e in rec.of("trial_reported") + decisions)
    assert seqs == list(range(1, len(seqs) + 1))
    fresh = make_core(cfg.search.scheduler, mode="min", seed=0)
    recorded = [(key_of[d["trial_id"]], d["milestone"], d["decision"]) for d in decisions]
    assert _replayed(fresh, rec.of("trial_reported"), decisions, key_of) == recorded
    # the driver beat for running trials, never for one paused at a rung (no resources)
    beats = rec.of("heartbeat")
    assert beats and {b["trial_id"] for b in beats} <= set(key_of)
    # TPE was told every end
    tpe = out.searcher
    assert {t.state.name for t in tpe.study.trials} <= {"COMPLETE", "PRUNED"}
    assert Decision.PROMOTE.value in kinds


class _KillOnce(Callback):
    """SIGKILL the trial's worker process the first time it reports step ``at``."""

    def __init__(self, at: int) -> None:
        self.at, self.done = at, False

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if not self.done and result["step"] == self.at:
            self.done = True
            os.kill(int(result["pid"]), signal.SIGKILL)


def test_sigkilled_trial_is_retried_from_its_checkpoint_bit_identical(ray_local, tiny_config,
                                                                      tmp_path):
    task = _task(tiny_config)
    point = {"hparams": {"lr": 0.01, **tiny_config.search.fixed}, "seed": 77, "index": 0}
    ref = []
    run_loop({"width": 16, "max_t": 27, "threads": 1, "gpus": 0, "point": point}, task,
                 report=lambda m, f: ref.append(m), checkpoint_root=tmp_path / "ref")
    rec = MemoryRecorder()
    out = run_trials([point], task=task, width=16, max_t=27, recorder=rec, sweep_id=1,
                     proxy_sweep_id=None, kind="target", scheduler=None, metric="val_loss",
                     # the kill comes at the report of step 15: no report held back
                     mode="min", ray_cfg=tiny_config.ray.model_copy(update={"report_hold_s": 0}),
                     storage=tmp_path / "ray",
                     name="kill", seq=itertools.count(1), checkpoint_every=6,
                     callbacks=[_KillOnce(15)])
    (t,) = out.trials
    assert t.status == "completed" and t.timing["restarts"] == 1
    assert t.timing["repeated_steps"] == 3          # 13–15 trained again from the step-12 ckpt
    assert t.timing["recovery_s"] > 0
    got = [(r["step"], r["val_loss"], r["train_loss"]) for r in t.reports]
    want = [(m["step"], m["val_loss"], m["train_loss"]) for m in ref]
    assert got == want                              # exact: the trajectory continued
    assert [e["step"] for e in rec.of("trial_reported")] == list(range(3, 28, 3))
    # the ledger: the allocated seconds cover both attempts (each report's wall_s counts from
    # its attempt's start), and the restart is recovery waste inside them
    first = next(r["wall_s"] for r in t.reports if r["step"] == 15)
    second = t.reports[-1]["wall_s"]
    assert t.timing["allocated_s"] >= first + second
    from mutune.scaling.time_split import sweep_waste, trial_time
    split = trial_time(t.timing)
    assert split.seconds["recovery"] == pytest.approx(t.timing["recovery_s"])
    assert split.seconds["recovery"] > 0
    assert sum(split.seconds.values()) == pytest.approx(split.allocated_s)
    waste = sweep_waste([(t.status, t.timing, t.timing["devices"])])
    assert waste.waste_s["recovery"] == pytest.approx(t.timing["recovery_s"] * t.timing["devices"])
