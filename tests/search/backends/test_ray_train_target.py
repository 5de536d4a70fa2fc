"""The target run on Ray Train (real TorchTrainer workers, gloo DDP on a real local Ray).

μP under DDP: the optimizer's parameter groups and learning rates are the unwrapped model's;
FSDP is refused with the parameters named; two workers on the same global batch end where one
worker does; the run is recorded like a trial and keeps its final checkpoint.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch

from mutune.errors import SearchError
from mutune.pipeline.recording import MemoryRecorder
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.search.backends.ray_train import DataParallel, mup_lr_groups, refuse_sharded
from tests.search.runs import run_target
from mutune.search.trial.checkpoint import latest_checkpoint, load_trial_state
from tests.conftest import config_error


@pytest.fixture
def gloo_group(tmp_path):
    """A real one-process gloo group (DDP needs an initialised process group)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_ddp_keeps_every_mup_learning_rate(tiny_config, gloo_group):
    """DDP wraps the model's own parameter tensors (their ``infshape`` included), so a μP
    optimizer built on the wrapped model has the unwrapped model's groups and rates."""
    task = ProxyTask(tiny_config.model, tiny_config.train, load_task_data(tiny_config))
    hp = {"lr": 0.01, "output_mult": 1.0}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = task.build(64, hp)
    wrapped = DataParallel(0, 1).wrap(model)
    plain = task.optimizer(model, 0.01)
    through = task.optimizer(wrapped.module, 0.01)
    assert mup_lr_groups(plain) == mup_lr_groups(through)
    rates = sorted({lr for lr, _ in mup_lr_groups(plain)})
    assert rates == [0.01 / 4, 0.01]     # hidden matrices at width 64 / base 16: lr / 4
    assert all(hasattr(p, "infshape") for p in wrapped.parameters())


def test_fsdp_is_refused_naming_the_parameters_before_anything_trains(tiny_config, tmp_path):
    """The refusal path (mutune never wraps a μP model in FSDP): the error names the field,
    the parameters that would lose mup's width metadata, and the issue; nothing is recorded."""
    from mutune.config import parse_config
    from mutune.errors import ConfigError
    from mutune.pipeline.sweep import open_sweep

    task = ProxyTask(tiny_config.model, tiny_config.train, load_task_data(tiny_config))
    with pytest.raises(ConfigError, match=r"parallelism = 'fsdp'.*hidden\.0\.weight.*mup#59"):
        refuse_sharded(task.build(32, {"lr": 0.01}))
    d = tiny_config.model_dump(mode="json")
    d["target"]["parallelism"] = "fsdp"
    rec = MemoryRecorder()
    with pytest.raises(ConfigError, match="FSDP cannot shard"):
        with open_sweep(parse_config(d), rec, out_dir=tmp_path):
            pass
    assert not rec.of("sweep_started")


def test_a_batch_that_does_not_split_evenly_is_refused():
    x = torch.zeros(6, 3)
    assert DataParallel(1, 3).shard(x, x)[0].shape == (2, 3)
    with pytest.raises(SearchError, match="multiple of target.num_workers"):
        DataParallel(0, 4).shard(x, x)


def _train_workers() -> list[int]:
    """PIDs of the Ray Train worker actors of this process's own local cluster (its
    descendants), never those of another test process's cluster on the same machine."""
    import psutil

    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "RayTrainWorker" in " ".join(proc.cmdline()):
                out.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def _run(task, cfg, tmp_path, name, workers):
    rec = MemoryRecorder()
    point = {"hparams": {"lr": 0.02, "output_mult": 1.0}, "seed": 5, "index": 0,
             "key": "target-t0"}
    out = run_target(point, task=task, width=64, max_t=12, recorder=rec, sweep_id=1,
                     ray_cfg=cfg.ray, storage=tmp_path, name=name, seq=itertools.count(1),
                     num_workers=workers, checkpoint_every=6)
    return out, rec


@pytest.mark.slow
def test_two_ddp_workers_end_where_one_does_and_are_recorded_like_a_trial(
        ray_local, tiny_config, tmp_path):
    """One worker against two, each of the two accumulating its share of the global batch
    over 2 micro-batches (all-reduced once per step, on the last: DDP's no_sync before it):
    the same run, and each recorded like a trial with its final model kept."""
    cfg = tiny_config
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    micro = dataclasses.replace(task, train=task.train.model_copy(update={"micro_batches": 2}))
    one, rec1 = _run(task, cfg, tmp_path, "one", 1)
    two, rec2 = _run(micro, cfg, tmp_path, "two-micro", 2)
    for out, rec, workers in ((one, rec1, 1), (two, rec2, 2)):
        (t,) = out.trials
        assert t.status == "completed" and t.last_step == 12
        assert [r["step"] for r in t.reports] == [3, 6, 9, 12]
        assert len(rec.of("trial_reported")) == 4
        (started,) = rec.of("trial_started")
        assert started["kind"] == "target"
        assert t.timing["devices"] == workers * cfg.ray.cpus_per_trial
        assert math.isfinite(t.reports[-1]["test_loss"])
        state = load_trial_state(latest_checkpoint(t.trial_dir))   # the final model, kept
        assert state["step"] == 12
    a, b = one.trials[0].reports[-1]["val_loss"], two.trials[0].reports[-1]["val_loss"]
    assert abs(a - b) / a < 1e-3, (a, b)


def test_num_workers_that_does_not_divide_the_batch_is_a_config_error(tiny_config):
    from mutune.config import parse_config
    from mutune.pipeline.target_devices import target_workers

    d = tiny_config.model_dump(mode="json")
    d["target"]["num_workers"] = 3                  # batch 64
    with config_error("target.num_workers", "3", "must divide the target's batch size"):
        parse_config(d)
    d["target"]["num_workers"] = None               # default on CPUs: one process
    d["ray"]["max_concurrent_trials"] = 2
    assert target_workers(parse_config(d)) == 1
    d["ray"]["gpus_per_trial"] = 1                  # with GPUs: the slots, made to divide
    assert target_workers(parse_config(d)) == 2
    d["train"]["batch_size"] = 63
    assert target_workers(parse_config(d)) == 1


@pytest.mark.slow
def test_a_killed_worker_is_retried_by_ray_train_from_the_last_checkpoint(
        ray_local, tiny_config, tmp_path):
    """SIGKILL the workers after the first report: Ray Train restarts the group
    from the latest checkpoint (``ray.max_failures``), the run completes, the restart is
    booked and no step is recorded twice."""
    import contextlib
    import os
    import signal
    import threading
    import time

    cfg = tiny_config
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    rec = MemoryRecorder()
    point = {"hparams": {"lr": 0.02, "output_mult": 1.0}, "seed": 5, "index": 0,
             "key": "target-t0"}
    box = {}

    def go():
        box["out"] = run_target(point, task=task, width=64, max_t=30, recorder=rec,
                                sweep_id=1, ray_cfg=cfg.ray, storage=tmp_path, name="kill",
                                seq=itertools.count(1), num_workers=2, checkpoint_every=3)
    thread = threading.Thread(target=go)
    thread.start()
    deadline = time.monotonic() + 240
    while not rec.of("trial_reported") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rec.of("trial_reported"), "no report within 240 s"
    pids = _train_workers()
    assert pids, "no Ray Train worker process found"
    for pid in pids:      # this run's workers (and any idle leftover of an earlier run)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    thread.join(timeout=600)
    (t,) = box["out"].trials
    assert t.status == "completed" and t.last_step == 30
    assert t.restarts >= 1
    steps = [e["step"] for e in rec.of("trial_reported")]
    assert steps == sorted(set(steps))                    # nothing recorded twice
    assert t.repeated_steps <= 3                          # at most one checkpoint interval


@pytest.mark.slow
def test_a_preempted_target_restarts_its_worker_group_without_a_failure(
        ray_local, tiny_config, tmp_path):
    """SIGTERM to the workers mid-run with ``max_failures: 0`` (the handler the backend
    installed in each worker actor's main thread hears it): the workers agree on the step,
    the leading one checkpoints it (and uploads it to ``ray.storage``), the fit ends cleanly
    and the next fit continues from that checkpoint; the run completes with one preemption,
    no restart, no step lost, and its reports equal an uninterrupted run's. (The notice file,
    URL and Ray's drain set the same flag: their sources are tested in test_preemption.)"""
    import contextlib
    import os
    import signal
    import threading
    import time

    MAX_T = 30        # long enough that the notice lands mid-run (sent after the 1st report)
    cfg = tiny_config
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    ray_cfg = cfg.ray.model_copy(update={"max_failures": 0})
    point = {"hparams": {"lr": 0.02, "output_mult": 1.0}, "seed": 5, "index": 0,
             "key": "target-t0"}

    def run(name, recorder, **ray_update):
        return run_target(point, task=task, width=64, max_t=MAX_T, recorder=recorder,
                          sweep_id=1, ray_cfg=ray_cfg.model_copy(update=ray_update),
                          storage=tmp_path, name=name,
                          seq=itertools.count(1), num_workers=2, checkpoint_every=15)

    ref_rec = MemoryRecorder()
    ref = run("ref", ref_rec)
    rec, box = MemoryRecorder(), {}
    # the preempted run keeps its checkpoints on remote storage (a shared folder) too
    remote = str(tmp_path / "remote")
    thread = threading.Thread(target=lambda: box.update(out=run("spot", rec, storage=remote)))
    thread.start()
    deadline = time.monotonic() + 240
    while not rec.of("trial_reported") and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = _train_workers()
    assert pids, "no Ray Train worker process found"
    for pid in pids:      # this run's workers (an idle one of the reference run hears it too)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    thread.join(timeout=600)
    (t,) = box["out"].trials
    assert t.status == "completed" and t.last_step == MAX_T, (t.status, t.reason)
    assert t.timing["preemptions"] == 1 and t.timing["restarts"] == 0
    assert t.repeated_steps == 0                         # the notice's step was checkpointed
    traj = [(r["step"], r["metrics"]["val_loss"]) for r in rec.of("trial_reported")]
    assert traj == [(r["step"], r["metrics"]["val_loss"]) for r in ref_rec.of("trial_reported")]
    assert ref.trials[0].timing["preemptions"] == 0
    from mutune.search.trial.remote import CheckpointStore

    assert t.timing["upload_s"] > 0 and CheckpointStore(remote, "spot").latest("target-t0")
