"""Checkpoint retention on a real local Ray cluster (slow): a stopped trial's checkpoints are
deleted when it ends; a completed one keeps its best and its latest; bytes are accounted."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from mutune.proxies.task import ProxyTask, load_task_data
from mutune.pipeline.recording import MemoryRecorder
from mutune.search.searchers import make_searcher
from mutune.search.searchers.space import trial_seeds
from tests.search.runs import run_trials

pytestmark = pytest.mark.slow


def test_stopped_trials_lose_their_checkpoints_completed_keep_best_and_latest(
        ray_local, tiny_config, tmp_path):
    cfg = tiny_config.model_copy(update={"search": tiny_config.search.model_copy(update={
        "num_samples": 6})})
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    out = run_trials(None, task=task, width=16, max_t=27, recorder=MemoryRecorder(),
                     sweep_id=1, proxy_sweep_id=2, kind="proxy", scheduler=cfg.search.scheduler,
                     metric="val_loss", mode="min", ray_cfg=cfg.ray, storage=tmp_path,
                     name="keep", seq=itertools.count(1), scheduler_seed=0,
                     searcher=make_searcher(cfg.search, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, 6), checkpoint_every=3, checkpoint_keep=1)
    by_status = {}
    for t in out.trials:
        by_status.setdefault(t.status, []).append(t)
        # every trial checkpointed every 3 steps (the evaluations) until it ended
        assert t.timing["checkpoint_bytes"] > 0, t.key
        on_disk = sorted(Path(t.trial_dir).glob("checkpoint_*"))
        if t.status in ("stopped", "diverged"):
            assert on_disk == [] and t.timing["checkpoint_bytes_kept"] == 0
        else:
            # keep 1 best by val_loss, plus the latest (which may be the same one)
            assert 1 <= len(on_disk) <= 2
            assert 0 < t.timing["checkpoint_bytes_kept"] < t.timing["checkpoint_bytes"]
    assert by_status.get("stopped") and by_status.get("completed")
