"""Trial checkpoints: atomic writes, and bit-identical resume after an interruption, a SIGTERM
(save, exit cleanly) and a SIGKILL (resume from the last periodic checkpoint). Tiny MLP (width
16, 27 steps) on CPU; no Ray here (tests/search/backends/test_ray_engine.py drives Ray's
retries)."""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mutune.errors import SearchError
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.search.trial.checkpoint import (STATE_FILE, STEP_FILE, load_trial_state,
                                          save_trial_state)
from mutune.training import run_loop

ROOT = Path(__file__).resolve().parents[3]
TRAJECTORY = ("step", "val_loss", "train_loss", "samples")


def _task(cfg):
    return ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()


def _config(**extra):
    return {"width": 16, "max_t": 27, "threads": 1, "gpus": 0,
            "point": {"hparams": {"lr": 0.01}, "seed": 1234, "index": 0}, **extra}


def _trajectory(reports, eval_every=3, max_t=27):
    """The reports at evaluation steps, trajectory keys only (timings differ by design)."""
    return [tuple(r[k] for k in TRAJECTORY) for r in reports
            if r["step"] % eval_every == 0 or r["step"] == max_t]


def _run(task, config, **kw):
    out = []
    status = run_loop(config, task, report=lambda m, folder: out.append(
        {**m, "folder": folder}), **kw)
    return status, out


def test_save_is_atomic_and_load_round_trips(tmp_path):
    import torch

    save_trial_state(tmp_path, {"step": 3, "w": torch.arange(4.0)})
    with pytest.raises((pickle.PicklingError, AttributeError)):   # cannot pickle a lambda
        save_trial_state(tmp_path, {"step": 6, "bad": lambda: None})   # cannot be saved
    # no temp file left; the step file still says the saved state's step
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([STATE_FILE, STEP_FILE])
    assert (tmp_path / STEP_FILE).read_text() == "3"
    state = load_trial_state(tmp_path)
    assert state["step"] == 3 and torch.equal(state["w"], torch.arange(4.0))
    with pytest.raises(SearchError, match="has no trial_state.pt"):
        load_trial_state(tmp_path / "missing")


def test_the_checkpoint_share_holds_periodic_checkpoints_back(tiny_config, tmp_path):
    task = _task(tiny_config)
    # every 3 steps, exactly: nine checkpoints over 27 steps (the last at max_t is not one)
    _, exact = _run(task, _config(checkpoint_every=3), checkpoint_root=tmp_path / "a")
    assert [r["step"] for r in exact if r["folder"]] == [3, 6, 9, 12, 15, 18, 21, 24]
    # a share of one millionth: after the first (which measures its seconds) the next would
    # be due seconds × 10⁶ later — none in a run of a second
    _, held = _run(task, _config(checkpoint_every=3, checkpoint_max_share=1e-6),
                   checkpoint_root=tmp_path / "b")
    assert [r["step"] for r in held if r["folder"]] == [3]
    assert held[-1]["checkpoints"] == 1.0
    assert [r["val_loss"] for r in held] == [r["val_loss"] for r in exact]   # same training


def test_the_checkpoint_share_counts_the_report_that_hands_the_folder_over(tiny_config,
                                                                           tmp_path):
    """Ray copies a reported folder into its storage before the report returns: a write of
    milliseconds with a hand-off of 0.25 s is a checkpoint of 0.25 s, so under a 5 % share
    the next one waits 5 s — longer than this whole run (counting the write alone, one would
    be due again after the 0.25 s, at every later evaluation)."""
    import time

    task = _task(tiny_config)
    out = []

    def report(metrics, folder):
        out.append({**metrics, "folder": folder})
        if folder is not None:
            time.sleep(0.25)            # what Ray's copy of a large checkpoint takes
    run_loop(task=task, config=_config(checkpoint_every=3, checkpoint_max_share=0.05),
                 report=report, checkpoint_root=tmp_path)
    assert [r["step"] for r in out if r["folder"]] == [3]
    assert [r["checkpoints"] for r in out][:2] == [1.0, 1.0]


def test_interrupted_then_resumed_is_bit_identical(tiny_config, tmp_path):
    task = _task(tiny_config)
    status, full = _run(task, _config(), checkpoint_root=tmp_path / "a")
    assert status == "completed" and [r["step"] for r in full] == list(range(3, 28, 3))

    class Killed(Exception):
        pass

    seen = []

    def report(m, folder):
        seen.append({**m, "folder": folder})
        if m["step"] == 15:
            raise Killed                      # dies right after the step-15 report

    with pytest.raises(Killed):
        run_loop(_config(checkpoint_every=6), task, report=report,
                     checkpoint_root=tmp_path / "b")
    folders = [r["folder"] for r in seen if r["folder"] is not None]
    assert [Path(f).name for f in folders] == ["step_000000006", "step_000000012"]
    status, rest = _run(task, _config(checkpoint_every=6), restore_dir=folders[-1],
                        checkpoint_root=tmp_path / "c")
    assert status == "completed" and rest[0]["restored_step"] == 12
    assert rest[0]["step"] == 15                      # steps 13–15 trained again
    merged = [r for r in seen if r["step"] <= 12] + rest
    assert _trajectory(merged) == _trajectory(full)   # exact float equality


_CHILD = textwrap.dedent("""
    import json, sys, time
    from tests.conftest import make_tiny_config
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.training import run_loop
    cfg = make_tiny_config()
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    def report(m, folder):
        print(json.dumps({**m, "folder": str(folder) if folder else None}), flush=True)
        time.sleep(0.15)   # leave the parent time to signal mid-run
    config = json.loads(sys.argv[1])
    status = run_loop(config, task, report=report, checkpoint_root=sys.argv[2])
    print(json.dumps({"status": status}), flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_mid_training_then_resume_is_bit_identical(tiny_config, tmp_path, sig):
    task = _task(tiny_config)
    _, full = _run(task, _config(), checkpoint_root=tmp_path / "ref")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD,
                             json.dumps(_config(checkpoint_every=6)), str(tmp_path / "ck")],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines = []
    for line in proc.stdout:
        lines.append(json.loads(line))
        if lines[-1].get("step") == 15:
            proc.send_signal(sig)
            break
    lines += [json.loads(x) for x in proc.stdout]
    rc = proc.wait(timeout=60)
    reports = [x for x in lines if "step" in x]
    if sig == signal.SIGTERM:
        # finishes the step in flight, reports it with a checkpoint, exits cleanly
        assert rc == 0 and lines[-1] == {"status": "preempted"}
        assert reports[-1]["folder"] is not None and reports[-1]["step"] in (16, 17, 18)
    else:
        assert rc == -signal.SIGKILL and "status" not in lines[-1]
    last = max((r for r in reports if r["folder"]), key=lambda r: r["step"])
    status, rest = _run(task, _config(checkpoint_every=6), restore_dir=last["folder"],
                        checkpoint_root=tmp_path / "resume")
    assert status == "completed" and rest[0]["restored_step"] == last["step"]
    merged = [r for r in reports if r["step"] <= last["step"]] + rest
    assert _trajectory(merged) == _trajectory(full)


def test_reports_carry_the_standard_error_and_test_only_at_max_t(tiny_config):
    """Every evaluation reports val_loss with its standard error; the test split is
    evaluated once, at max_t, and never before (the scheduler must not see it)."""
    import math

    task = _task(tiny_config)
    status, reports = _run(task, _config())
    assert status == "completed"
    assert all(r["val_loss_se"] > 0 and math.isfinite(r["val_loss_se"]) for r in reports)
    assert all("test_loss" not in r for r in reports[:-1])
    last = reports[-1]
    assert last["step"] == 27 and last["test_loss"] > 0 and last["test_loss_se"] > 0
    assert last["test_loss"] != last["val_loss"]
