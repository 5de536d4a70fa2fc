"""The training recipe's knobs in a search space: β1, β2, ε, weight decay, clipping, warmup
fraction and dropout reach each trial's optimizer, schedule and model; their ranges are
checked where they are defined; and the transfer stage fits rules only where Tensor
Programs V (Table 1) says a knob transfers — a choice is compared per width, weight decay and
dropout are not transferred. Tiny MLP on CPU, no Ray."""
from __future__ import annotations

import math

import pytest
import torch

from mutune.config import load_config, parse_config
from mutune.pipeline.confirm_stage import design_points
from mutune.pipeline.transfer_stage import transfer_rules
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.training.schedule import make_lr_schedule
from mutune.training import run_loop
from tests.conftest import MLP_DIGITS, config_error
from mutune.pipeline.optimum_record import WidthOptimum


def typed(optima):
    return [WidthOptimum.from_json(o) for o in optima]


def _space(**extra):
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["search"]["space"] = {"lr": {"type": "loguniform", "low": 1e-3, "high": 1e-1}, **extra}
    d["transfer"]["n_boot"] = 200
    return d


def test_knob_ranges_are_checked_where_each_knob_is_defined():
    ok = parse_config(_space(beta2={"type": "loguniform", "low": 0.9, "high": 0.9999},
                             dropout={"type": "uniform", "low": 0.0, "high": 0.3},
                             warmup_fraction={"type": "choice", "values": [0.0, 0.1]}))
    assert set(ok.search.space) == {"lr", "beta2", "dropout", "warmup_fraction"}
    with config_error("search.space.beta2", "1.0", "is outside [0, 1), where beta2 is defined"):
        parse_config(_space(beta2={"type": "uniform", "low": 0.9, "high": 1.0}))
    d = _space()
    d["search"]["fixed"] = {"dropout": 1.0}
    with config_error("search.fixed.dropout", "1.0", "is outside [0, 1)"):
        parse_config(d)
    d = _space(dropout={"type": "uniform", "low": 0.0, "high": 0.3})
    d["model"] = {"family": "gpt", "base_width": 32, "d_head": 16}
    d["data"] = {"kind": "text"}
    d["widths"], d["target"]["width"] = [32, 64], 128
    with config_error("search.space.dropout", rule="which model.family 'gpt' does not take"):
        parse_config(d)


def _task(tiny_config):
    return ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()


def test_a_points_knobs_reach_its_optimizer_schedule_and_model(tiny_config):
    task = _task(tiny_config)
    hp = {"lr": 0.01, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "weight_decay": 0.05,
          "grad_clip": 0.5, "warmup_fraction": 0.25, "dropout": 0.2}
    mine = task.for_point(hp)
    assert task.for_point({"lr": 0.01}) is task                 # nothing to change
    assert (mine.train.beta1, mine.train.beta2, mine.train.eps) == (0.8, 0.95, 1e-6)
    assert mine.train.weight_decay == 0.05 and mine.train.grad_clip == 0.5
    model = mine.build(32, hp)
    opt = mine.optimizer(model, 0.01)
    assert all(g["betas"] == (0.8, 0.95) and g["eps"] == 1e-6 for g in opt.param_groups)
    # MuAdamW scales a group's decay against its lr: the decoupled product λ·η stays 0.05·η
    assert [g["weight_decay"] * g["lr"] for g in opt.param_groups] == pytest.approx(
        [0.05 * 0.01] * len(opt.param_groups))
    sched = make_lr_schedule(opt, mine.train, 40)          # warmup: round(0.25 × 40) = 10 steps
    start = [g["initial_lr"] for g in opt.param_groups]
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([v / 10 for v in start])
    assert sched is not None
    assert model.drop.p == 0.2 and isinstance(task.build(32, {"lr": 0.01}).drop,
                                              torch.nn.Identity)
    model.train()
    assert (model.drop(torch.ones(1000)) == 0).any()    # live in training (the readout
    model.eval()                                         # starts at zero, so not via logits)
    assert torch.equal(model.drop(torch.ones(1000)), torch.ones(1000))


def test_a_trial_trains_with_its_clip_and_betas(tiny_config):
    task = _task(tiny_config)
    out = []
    cfg = {"width": 32, "max_t": 12, "threads": 1, "gpus": 0,
           "point": {"hparams": {"lr": 0.05, "grad_clip": 1e-9, "beta1": 0.5}, "seed": 3,
                     "index": 0}}
    assert run_loop(cfg, task, report=lambda m, f: out.append(m)) == "completed"
    free = []
    cfg["point"]["hparams"] = {"lr": 0.05}
    run_loop(cfg, task, report=lambda m, f: free.append(m))
    # clipped to norm 1e-9, every gradient is far below Adam's ε (1e-8): the updates shrink
    # about tenfold and the clipped trial barely moves from chance while the free one learns
    assert out[-1]["val_loss"] > math.log(10) - 0.01
    assert free[-1]["val_loss"] < out[-1]["val_loss"] - 0.1


def test_design_levels_stay_where_a_knob_is_defined():
    pts = design_points({"lr": 0.01, "beta2": 0.99}, ["beta2", "lr"], 1.0)
    assert max(p["beta2"] for p in pts) == pytest.approx(1 - 1e-6)
    assert min(p["beta2"] for p in pts) == pytest.approx(0.495)


def _optima(rows):
    names = list(rows[0])
    return [{"optimum": dict(r), "interval": {n: [v * 0.8, v * 1.2] for n, v in r.items()},
             "on_edge": {n: False for n in names}, "edge_side": {n: None for n in names}}
            for r in rows]


def test_rules_are_fitted_only_where_a_knob_transfers():
    cfg = parse_config(_space(
        weight_decay={"type": "loguniform", "low": 1e-3, "high": 1.0},
        output_mult={"type": "choice", "values": [1.0, 4.0, 16.0]},
        beta2={"type": "loguniform", "low": 0.5, "high": 0.9999}))
    widths = [64, 128, 256]
    optima = _optima([{"lr": 0.01, "weight_decay": 0.3, "output_mult": 3.0, "beta2": 0.9},
                      {"lr": 0.011, "weight_decay": 0.1, "output_mult": 5.0, "beta2": 0.95},
                      {"lr": 0.009, "weight_decay": 0.02, "output_mult": 14.0,
                       "beta2": 0.999}])
    rules, hp, settings = transfer_rules(cfg, widths, typed(optima))
    by = {r["hyperparameter"]: r for r in rules}
    wd = by["weight_decay"]
    assert wd["verdict"] == "not_transferred" and wd["slope"] is None
    assert hp["weight_decay"] == 0.02 == settings["weight_decay"]   # the widest's, no law
    assert "Table 1" in wd["reason"]
    ch = by["output_mult"]
    assert ch["verdict"] == "per_choice" and ch["optima"] == [4.0, 4.0, 16.0]
    assert hp["output_mult"] == 16.0 and "changes with width" in ch["advice"]
    assert ch["edge_widths"] == []
    b2 = by["beta2"]
    assert b2["slope"] is not None and hp["beta2"] < 1.0       # fitted, held below 1
    assert by["lr"]["verdict"] in {"stable", "noisy"}
