"""Real Ray Tune runs of the ASHA adapter on a tiny MLP (slow: a real local Ray cluster)."""
from __future__ import annotations

import itertools
import math

import pytest

from mutune.proxies.task import ProxyTask, load_task_data
from mutune.pipeline.recording import MemoryRecorder
from mutune.search.searchers.space import sample_configs, trial_seeds
from tests.search.runs import run_trials

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["asha", "hyperband"])
def test_sweep_on_ray_records_every_report_and_decision(ray_local, tiny_config, tmp_path, kind):
    cfg = tiny_config
    sched = cfg.search.scheduler.model_copy(update={"kind": kind})
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg))
    hps = sample_configs(cfg.search, cfg.seed, 0)
    hps[0]["lr"] = 1e30   # Adam steps of 1e30: the loss is NaN by step 3
    points = [{"hparams": hp, "seed": s, "index": i}
              for i, (hp, s) in enumerate(zip(hps, trial_seeds(cfg.seed, 0, len(hps))))]
    rec = MemoryRecorder()
    seq = itertools.count(1)
    out = run_trials(points, task=task, width=16, max_t=27, recorder=rec, sweep_id=1,
                     proxy_sweep_id=2, kind="proxy", scheduler=sched,
                     metric="val_loss", mode="min", ray_cfg=cfg.ray, storage=tmp_path,
                     name="t", seq=seq, scheduler_seed=7)
    assert len(out.trials) == 4
    statuses = {t.status for t in out.trials}
    assert statuses <= {"completed", "stopped", "diverged"}
    assert "completed" in statuses
    # every report reached the recorder once, in sequence order, reports before decisions
    reports = rec.of("trial_reported")
    decisions = rec.of("scheduler_decided")
    assert sum(len(t.reports) for t in out.trials) == len(reports)
    seqs = [e["seq"] for e in reports + decisions]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))
    for t in out.trials:
        steps = [r["step"] for r in t.reports]
        assert steps == sorted(set(steps))
        assert t.timing["allocated_s"] >= t.timing["productive_s"] + t.timing["eval_s"] - 1e-6
        if t.status == "completed":
            assert t.last_step == 27
        if t.status == "stopped":
            assert t.last_step < 27
            assert any(d["decision"] == "stop" for d in decisions
                       if d["trial_id"] == t.trial_id)
    diverged = [t for t in out.trials if t.point["index"] == 0]
    assert diverged[0].status == "diverged"
    assert not math.isfinite(diverged[0].reports[-1]["val_loss"])
    # the decisions match a pure replay of the core on the recorded order
    from mutune.search.backends.groups import make_core
    core = make_core(sched, mode="min", seed=7)
    by_id = {t.trial_id: t.key for t in out.trials}
    replayed = []
    for e in sorted(reports, key=lambda e: e["seq"]):
        for j in core.on_report(by_id[e["trial_id"]], e["step"], e["metrics"]["val_loss"]):
            replayed.append((j.trial, j.milestone, j.decision.value))
    recorded = [(by_id[d["trial_id"]], d["milestone"], d["decision"]) for d in decisions]
    assert replayed == recorded


def test_every_slot_starts_its_actor_at_once_and_the_setting_is_scoped(ray_local, tiny_config,
                                                                        tmp_path, monkeypatch):
    """Ray Tune allows a custom searcher one pending trial, so the second slot's actor started
    only once the first was up; run_trials lets both be pending (2 slots here): when the first
    trial starts, the second already exists. The setting lasts for the run only."""
    from ray.tune import Callback

    from mutune.search.backends.ray_tune.cluster import PENDING_ENV

    monkeypatch.delenv(PENDING_ENV, raising=False)

    class Seen(Callback):
        def __init__(self):
            self.at_first_start, self.env = None, None

        def setup(self, **info):
            import os
            self.env = os.environ.get(PENDING_ENV)

        def on_trial_start(self, iteration, trials, trial, **info):
            if self.at_first_start is None:
                self.at_first_start = len(trials)

    seen = Seen()
    cfg = tiny_config
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg))
    hps = sample_configs(cfg.search, cfg.seed, 0)
    points = [{"hparams": hp, "seed": s, "index": i}
              for i, (hp, s) in enumerate(zip(hps, trial_seeds(cfg.seed, 0, len(hps))))]
    out = run_trials(points, task=task, width=16, max_t=9, recorder=MemoryRecorder(),
                     sweep_id=1, proxy_sweep_id=2, kind="proxy", scheduler=cfg.search.scheduler,
                     metric="val_loss", mode="min", ray_cfg=cfg.ray, storage=tmp_path,
                     name="pending", seq=itertools.count(1), scheduler_seed=0,
                     callbacks=[seen])
    import os
    assert len(out.trials) == len(points)
    assert seen.env == "2" and seen.at_first_start == 2
    # each report names its worker process: the 2 slots' actors ran every trial (reused)
    pids = {t.reports[-1]["worker_pid"] for t in out.trials}
    assert 1 <= len(pids) <= 2
    assert all(t.reports[0]["began_at"] == t.reports[-1]["began_at"] for t in out.trials)
    # each trial's wait for its worker: the first on a new actor waits for its start-up
    starts = [t.timing["start_s"] for t in out.trials]
    assert all(0 <= s <= t.timing["allocated_s"] for s, t in zip(starts, out.trials))
    assert max(starts) > 0
    assert PENDING_ENV not in os.environ


def test_a_pending_limit_the_user_set_is_kept(monkeypatch):
    import os

    from mutune.search.backends.ray_tune.cluster import PENDING_ENV, pending_trials

    monkeypatch.setenv(PENDING_ENV, "5")
    with pending_trials(2):
        assert os.environ[PENDING_ENV] == "5"
    assert os.environ[PENDING_ENV] == "5"
    monkeypatch.delenv(PENDING_ENV)
    with pending_trials(0):            # a run has at least one slot
        assert os.environ[PENDING_ENV] == "1"
    assert PENDING_ENV not in os.environ
