"""Zombie trials on a real local Ray cluster (slow): a trial that holds its CPU but stops making
progress is flagged, its worker killed, not retried, and recorded ``zombie`` with the reason —
while the other trials of the run finish normally."""
from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from types import SimpleNamespace

import pytest

from mutune.proxies.task import ProxyTask, load_task_data
from mutune.pipeline.recording import MemoryRecorder
from tests.search.runs import run_trials

pytestmark = pytest.mark.slow


@dataclasses.dataclass(frozen=True)
class HangingTask(ProxyTask):
    """The real task, except that the trial seeded ``hang_seed`` blocks forever fetching the
    batch of step 5 — a stand-in for a worker stuck in a collective or a dead device."""
    hang_seed: int = -1

    def batch(self, seed: int, step: int):
        if seed == self.hang_seed and step == 5:
            time.sleep(3600)
        return super().batch(seed, step)


def test_a_trial_without_progress_is_flagged_and_stopped(ray_local, tiny_config, tmp_path):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers get the class
    base = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    task = HangingTask(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)
                          if f.init}, hang_seed=11)
    hp = {"lr": 0.01, **tiny_config.search.fixed}
    points = [{"hparams": hp, "seed": s, "index": i} for i, s in enumerate((11, 12))]
    ray_cfg = tiny_config.ray.model_copy(update={"zombie_timeout_s": 8.0, "max_failures": 2})
    rec = MemoryRecorder()
    t0 = time.monotonic()
    out = run_trials(points, task=task, width=16, max_t=27, recorder=rec, sweep_id=1,
                     proxy_sweep_id=None, kind="target", scheduler=None, metric="val_loss",
                     mode="min", ray_cfg=ray_cfg, storage=tmp_path, name="zombie",
                     seq=itertools.count(1))
    assert time.monotonic() - t0 < 300            # the hang did not hold the run
    by_seed = {t.point["seed"]: t for t in out.trials}
    hung, ok = by_seed[11], by_seed[12]
    assert hung.status == "zombie" and hung.reason.startswith("zombie: no report for ")
    assert "ray.zombie_timeout_s 8 s" in hung.reason
    assert hung.timing["restarts"] == 0           # flagged trials are not retried
    assert hung.last_step < 5                     # it never got past the hang
    assert hung.timing["allocated_s"] >= 8.0      # it held its CPU through the timeout
    assert ok.status == "completed" and ok.last_step == 27
    finished = {e["trial_id"]: e for e in rec.of("trial_finished")}
    assert finished[hung.trial_id]["status"] == "zombie"


def test_the_zombie_clock_starts_at_the_first_report_and_a_start_has_its_own(monkeypatch):
    """A cold start (no report yet in this segment) is judged by ``start_timeout_s`` only;
    after the first report, silence is judged by ``zombie_timeout_s``; a promoted or retried
    trial's new segment starts cold again."""
    import ray
    from ray.tune.experiment import Trial

    from mutune.search.backends.trial_record import TrialRecord
    from mutune.search.backends.ray_tune.zombies import ZombieReaper

    killed = []
    monkeypatch.setattr(ray, "kill", lambda actor, no_restart: killed.append(actor))

    def trial(tid):
        return SimpleNamespace(trial_id=tid, status=Trial.RUNNING, max_failures=3,
                               num_failures=0,
                               temporary_state=SimpleNamespace(ray_actor=f"actor-{tid}"))

    def rec(segment_start, last_progress):
        return TrialRecord("k", 1, {}, 0.0, segment_start=segment_start,
                           last_progress=last_progress)

    now = 1000.0
    records = {"cold": rec(now - 30, None),                  # 30 s, no report yet
               "slow-start": rec(now - 90, None),            # 90 s, no report yet
               "quiet": rec(now - 100, now - 25),            # reported, then 25 s quiet
               "retried": rec(now - 30, now - 200)}          # new segment: cold again
    trials = [trial(t) for t in records]
    only_zombie = ZombieReaper(20.0, devices=1, device_kind="cpu")
    assert only_zombie.reap(trials, records, now) == ["quiet"]
    assert only_zombie.flagged["quiet"].startswith("zombie: no report for 25.0 s > "
                                                   "ray.zombie_timeout_s 20 s")
    both = ZombieReaper(20.0, devices=1, device_kind="cpu", start_timeout_s=60.0)
    assert both.reap([trial(t) for t in records], records, now) == ["slow-start", "quiet"]
    assert both.flagged["slow-start"].startswith(
        "zombie: no first report 90.0 s after its start > ray.start_timeout_s 60 s")
    assert killed == ["actor-quiet", "actor-slow-start", "actor-quiet"]
