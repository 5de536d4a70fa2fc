"""torch's optimizers without the first-call torch._dynamo import (mutune._internals):
a fresh process trains, checkpoints and resumes a trial without importing it; the updates
and state equal torch's own classes' bit for bit; the step hooks, LR schedulers, grad mode
and a compiled step behave as with torch's classes."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from mutune._internals import eager_optimizers, optimizer_class
from tests.conftest import MLP_DIGITS

EAGER_OPTIMIZERS = eager_optimizers()
EagerAdam, EagerAdamW, EagerSGD = (EAGER_OPTIMIZERS[k] for k in ("adam", "adamw", "sgd"))

CASES = [
    (EagerAdam, torch.optim.Adam, {"lr": 1e-2, "betas": (0.8, 0.95), "fused": True}),
    (EagerAdam, torch.optim.Adam, {"lr": 1e-2, "foreach": True, "amsgrad": True}),
    (EagerAdamW, torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1, "fused": True}),
    (EagerAdamW, torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1, "foreach": False}),
    (EagerSGD, torch.optim.SGD, {"lr": 1e-2, "momentum": 0.9, "weight_decay": 1e-3}),
]


def _params(seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(7, 5, generator=gen).requires_grad_(),
            torch.randn(5, generator=gen).requires_grad_()]


def _train(cls, kwargs, steps: int = 6, opt_out: list | None = None) -> list[torch.Tensor]:
    params = _params(0)
    opt = cls([{"params": params[:1]}, {"params": params[1:], "lr": kwargs["lr"] / 3}],
              **kwargs)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        x = torch.randn(3, 7, generator=gen)
        ((x @ params[0] + params[1]) ** 2).mean().backward()
        opt.step()
    if opt_out is not None:
        opt_out.append(opt)
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("eager,torch_cls,kwargs", CASES)
def test_updates_and_state_equal_torch_bit_for_bit(eager, torch_cls, kwargs):
    ours, theirs = [], []
    a = _train(eager, kwargs, opt_out=ours)
    b = _train(torch_cls, kwargs, opt_out=theirs)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    sa, sb = ours[0].state_dict(), theirs[0].state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i, st in sb["state"].items():
        assert st.keys() == sa["state"][i].keys()
        assert all(torch.equal(torch.as_tensor(st[k]), torch.as_tensor(sa["state"][i][k]))
                   for k in st)
    # the eager optimizer loads torch's state (and its own): the next steps agree
    fresh = eager([{"params": _params(5)[:1]}, {"params": _params(5)[1:]}], **kwargs)
    fresh.load_state_dict(sb)
    assert fresh.state_dict()["param_groups"] == sb["param_groups"]


def test_step_runs_without_autograd_and_restores_grad_mode():
    params = _params(0)
    opt = EagerAdamW(params, lr=0.1)
    (params[0].sum() + params[1].sum()).backward()
    with torch.enable_grad():
        opt.step()
        assert torch.is_grad_enabled()
    assert all(p.grad_fn is None and p.is_leaf for p in params)
    with torch.no_grad():
        opt.step()
        assert not torch.is_grad_enabled()


def test_step_hooks_and_lr_schedulers_still_run():
    params = _params(0)
    opt = EagerSGD(params, lr=1.0)
    seen = []
    opt.register_step_pre_hook(lambda o, a, k: seen.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: seen.append("post"))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 ** s)
    for _ in range(3):
        opt.zero_grad()
        params[0].sum().backward()
        opt.step()
        sched.step()
    assert seen == ["pre", "post"] * 3
    assert opt.param_groups[0]["lr"] == pytest.approx(0.125)
    # SGD lr 1, 0.5, 0.25 on a gradient of ones: the weights moved by 1.75
    assert torch.allclose(params[0], _params(0)[0] - 1.75)


def test_a_compiled_step_is_what_torchs_class_compiles_to():
    results = []
    for cls in (EagerAdam, torch.optim.Adam):
        params = _params(0)
        opt = cls(params, lr=0.1, foreach=False)
        for p in params:
            p.grad = torch.ones_like(p)
        torch.compile(opt.step, backend="eager")()
        results.append(params)
    assert all(torch.equal(p, q) for p, q in zip(*results))


def test_every_kind_maps_to_an_eager_class():
    assert {k: optimizer_class(k) for k in ("adam", "adamw", "sgd")} == EAGER_OPTIMIZERS
    assert issubclass(EagerAdamW, torch.optim.AdamW) and EagerAdamW.__name__ == "EagerAdamW"


@pytest.mark.parametrize("kind", ["adamw", "adam", "sgd"])
def test_a_fresh_process_trains_checkpoints_and_resumes_without_torch_dynamo(kind, tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from mutune.config import load_config, parse_config
        from mutune.proxies.task import ProxyTask, load_task_data
        from mutune.training import run_loop
        d = load_config({str(MLP_DIGITS)!r}).model_dump(mode="json")
        d["train"].update(optimizer={kind!r}, grad_clip=1.0, lr_schedule="cosine",
                          warmup_steps=2, weight_decay=0.0 if {kind!r} == "adam" else 0.01)
        cfg = parse_config(d)
        task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
        conf = {{"width": cfg.widths[0], "max_t": 20, "threads": 1, "checkpoint_at": [10],
                "point": {{"hparams": {{"lr": 1e-3}}, "seed": 0, "index": 0}}}}
        runs = [[], []]
        run_loop(conf, task, report=lambda m, c: runs[0].append((m, c)),
                     checkpoint_root={str(tmp_path)!r})
        folder = next(c for m, c in runs[0] if c is not None)
        run_loop(conf, task, report=lambda m, c: runs[1].append((m, c)), restore_dir=folder)
        assert runs[0][-1][0]["val_loss"] == runs[1][-1][0]["val_loss"]
        print("dynamo" if "torch._dynamo" in sys.modules else "no dynamo")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "no dynamo"
