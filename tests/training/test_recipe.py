"""The training recipe's knobs in the loop every trial runs: learning-rate schedules that keep
μP's per-group ratios, gradient clipping, gradient accumulation over micro-batches, Adam's ε,
and a scheduled trial resumed bit for bit. Tiny MLP (width 16) on CPU, no Ray."""
from __future__ import annotations

import math

import pytest
import torch

from mutune.config import parse_config
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.training.schedule import lr_factor, make_lr_schedule
from mutune.training import run_loop


def _task(tiny_config, **train):
    d = tiny_config.model_dump(mode="json")
    d["train"].update(train)
    cfg = parse_config(d)
    return ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()


def _config(width=32, max_t=12, **extra):
    return {"width": width, "max_t": max_t, "threads": 1, "gpus": 0,
            "point": {"hparams": {"lr": 0.01}, "seed": 7, "index": 0}, **extra}


def _run(task, config, **kw):
    out = []
    status = run_loop(config, task, report=lambda m, folder: out.append(
        {**m, "folder": folder}), **kw)
    return status, out


@pytest.mark.parametrize("kind", ["constant", "cosine", "linear", "wsd"])
def test_schedule_shapes(kind):
    total, warm, m = 20, 4, 0.1
    f = [lr_factor(t, total, kind=kind, warmup_steps=warm, min_lr_ratio=m,
                   decay_fraction=0.25) for t in range(total)]
    assert f[:warm] == pytest.approx([0.25, 0.5, 0.75, 1.0])          # linear warmup
    assert all(0 < v <= 1 for v in f)
    if kind == "constant":
        assert f[warm:] == [1.0] * (total - warm)
        return
    assert f[-1] == pytest.approx(m)                     # every decay ends at m × the start
    assert all(a >= b for a, b in zip(f[warm:], f[warm + 1:]))          # never rises again
    if kind == "wsd":                                    # stable, then the last 5 decay
        assert f[warm:total - 5] == [1.0] * (total - 5 - warm) and f[total - 5] < 1.0
    if kind == "cosine":
        mid = warm + (total - warm) // 2 - 1             # half-way: half-way between 1 and m
        assert f[mid] == pytest.approx(m + (1 - m) * 0.5)
    with pytest.raises(ValueError, match="schedule 'step'"):
        lr_factor(0, 10, kind="step")
    with pytest.raises(ValueError, match="update 10 of a 10-step run"):
        lr_factor(10, 10, kind=kind)


def test_schedule_keeps_every_mup_groups_ratio_at_every_step(tiny_config):
    """mup gives each parameter group its own lr (hidden and readout weights: base lr ÷
    width_mult under Adam); under a warmup + cosine schedule every group's lr divided by the
    first group's equals the unscheduled optimizer's ratio at every step."""
    task = _task(tiny_config, optimizer="adam", lr_schedule="cosine", warmup_steps=3,
                 min_lr_ratio=0.1)
    model = task.build(64, {"lr": 0.01})
    opt = task.optimizer(model, 0.01)
    plain = [g["lr"] for g in task.optimizer(task.build(64, {"lr": 0.01}), 0.01).param_groups]
    assert len(set(plain)) >= 2                        # the test needs μP's distinct groups
    sched = make_lr_schedule(opt, task.train, 12)
    for t in range(12):
        lrs = [g["lr"] for g in opt.param_groups]
        factor = lr_factor(t, 12, kind="cosine", warmup_steps=3, min_lr_ratio=0.1)
        assert lrs == pytest.approx([p * factor for p in plain], rel=1e-12)
        assert [v / lrs[0] for v in lrs] == pytest.approx([p / plain[0] for p in plain],
                                                          rel=1e-12)
        opt.step()
        sched.step()
    assert make_lr_schedule(opt, _task(tiny_config).train, 12) is None       # constant: none


def test_clipping_bounds_the_global_gradient_norm(tiny_config, monkeypatch):
    """With grad_clip c every update sees gradients of global L2 norm ≤ c; without it the
    same trial's gradients are far larger (so the bound is not vacuous)."""
    norms = {}
    make = ProxyTask.optimizer

    def recording(task):
        def optimizer(self, model, lr):
            opt = make(self, model, lr)
            step = opt.step

            def recorded_step(*a, **k):
                g = [p.grad for p in model.parameters() if p.grad is not None]
                norms.setdefault(self.train.grad_clip, []).append(
                    float(torch.linalg.vector_norm(torch.stack(
                        [torch.linalg.vector_norm(x) for x in g]))))
                return step(*a, **k)
            opt.step = recorded_step
            return opt
        monkeypatch.setattr(ProxyTask, "optimizer", optimizer)
        return task

    for clip in (None, 0.01):
        task = recording(_task(tiny_config, grad_clip=clip))
        status, _ = _run(task, _config(max_t=9))
        assert status == "completed"
    assert len(norms[0.01]) == 9 and max(norms[0.01]) <= 0.01 * (1 + 1e-5)
    assert len(norms[None]) == 9 and min(norms[None]) > 0.05


def test_accumulating_micro_batches_equals_the_whole_batch(tiny_config):
    """k micro-batches of batch/k, gradients accumulated, one update per step: the same
    trajectory as one batch k× larger, to float tolerance (and the same samples counted)."""
    whole = _run(_task(tiny_config, batch_size=32), _config())[1]
    for k in (2, 4):
        parts = _run(_task(tiny_config, batch_size=32, micro_batches=k), _config())[1]
        assert [r["step"] for r in parts] == [r["step"] for r in whole]
        assert [r["samples"] for r in parts] == [r["samples"] for r in whole]
        for a, b in zip(parts, whole):
            assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-5)
            assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5)
    with pytest.raises(Exception, match=r"micro_batches \(3\) must divide batch_size \(32\)"):
        _task(tiny_config, batch_size=32, micro_batches=3)


def test_a_scheduled_trial_resumes_bit_for_bit(tiny_config, tmp_path):
    """The schedule's position is in the checkpoint: killed after step 9 and resumed from
    its step-6 checkpoint, a warmup + cosine trial reports exactly what an uninterrupted one
    does."""
    task = _task(tiny_config, lr_schedule="cosine", warmup_steps=4, grad_clip=1.0)
    _, full = _run(task, _config(), checkpoint_root=tmp_path / "a")

    class Killed(Exception):
        pass

    seen = []

    def report(m, folder):
        seen.append({**m, "folder": folder})
        if m["step"] == 9:
            raise Killed

    with pytest.raises(Killed):
        run_loop(_config(checkpoint_every=6), task, report=report,
                     checkpoint_root=tmp_path / "b")
    (folder,) = [r["folder"] for r in seen if r["folder"] is not None]
    _, rest = _run(task, _config(), restore_dir=folder, checkpoint_root=tmp_path / "c")
    merged = [r for r in seen if r["step"] <= 6] + rest
    assert [(r["step"], r["val_loss"], r["train_loss"]) for r in merged] == \
        [(r["step"], r["val_loss"], r["train_loss"]) for r in full]


def test_adam_eps_reaches_the_optimizer(tiny_config):
    task = _task(tiny_config, eps=1e-6)
    opt = task.optimizer(task.build(32, {"lr": 0.01}), 0.01)
    assert all(math.isclose(g["eps"], 1e-6) for g in opt.param_groups)
