"""Zombie trials on a real local Ray cluster (slow): a trial that holds its CPU but stops making
progress is flagged, its worker killed, not retried, and recorded ``zombie`` with the reason —
while the other trials of the run finish normally."""
from __future__ import annotations

import dataclasses
import itertools
import sys
import time

import pytest

from mutune.proxies.task import ProxyTask, load_task_data
from mutune.pipeline.recording import MemoryRecorder
from mutune.search.backends.ray_tune.run import run_trials

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
    task = HangingTask(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
                       hang_seed=11)
    hp = {"lr": 0.01, **tiny_config.search.fixed}
    points = [{"hparams": hp, "seed": s, "index": i} for i, s in enumerate((11, 12))]
    ray_cfg = tiny_config.ray.model_copy(update={"zombie_timeout_s": 20.0, "max_failures": 2})
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
    assert "ray.zombie_timeout_s 20 s" in hung.reason
    assert hung.timing["restarts"] == 0           # flagged trials are not retried
    assert hung.last_step < 5                     # it never got past the hang
    assert hung.timing["allocated_s"] >= 20.0     # it held its CPU through the timeout
    assert ok.status == "completed" and ok.last_step == 27
    finished = {e["trial_id"]: e for e in rec.of("trial_finished")}
    assert finished[hung.trial_id]["status"] == "zombie"
