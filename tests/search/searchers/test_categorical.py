"""Categorical knobs (a choice among names, ``lr_schedule``): validated where they are read,
drawn as names by every searcher, reaching a trial's schedule, chosen per width by their best
trials (no quadratic dimension), and carried as names through rules, report, plot and export.
Synthetic rungs and a tiny MLP on CPU; the end-to-end sweep with a categorical knob is
tests/pipeline/test_pipeline.py's concurrency-1 rerun."""
from __future__ import annotations

import io
import math
from types import SimpleNamespace

import numpy as np
import pytest

from mutune.pipeline.optimum_record import WidthOptimum
from mutune.config import load_config, parse_config
from mutune.errors import ConfigError
from mutune.pipeline.choice_optimum import best_choice
from mutune.pipeline.transfer_stage import transfer_rules, width_optimum
from mutune.search.best import BestTrial
from mutune.search.searchers import make_searcher
from mutune.search.searchers.simple import grid_points
from mutune.search.searchers.space import describe, sample_configs
from tests.conftest import MLP_DIGITS, config_error

SCHEDULES = {"type": "choice", "values": ["constant", "cosine", "wsd"]}


def _cfg(**space):
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["search"]["space"] = {"lr": {"type": "loguniform", "low": 1e-3, "high": 1e-1}, **space}
    d["transfer"]["n_boot"] = 200
    d["transfer"]["n_boot_optimum"] = 50
    return d


def test_a_categorical_knob_is_read_as_names_and_refused_otherwise():
    cfg = parse_config(_cfg(lr_schedule=SCHEDULES))
    assert cfg.search.space["lr_schedule"].values == ["constant", "cosine", "wsd"]
    assert cfg.search.space["lr_schedule"].categorical
    assert not parse_config(_cfg(output_mult={"type": "choice", "values": [1, 4]})).search \
        .space["output_mult"].categorical
    bad = [
        (dict(lr_schedule={"type": "choice", "values": ["cosine", "step"]}),
         "['cosine', 'step']", "'step' is not one of constant, cosine, linear, wsd"),
        (dict(lr_schedule={"type": "loguniform", "low": 0.1, "high": 1.0}),
         "'loguniform'", "a name, searched as a choice among constant, cosine"),
        (dict(lr_schedule={"type": "choice", "values": [1.0, 2.0]}), "[1.0, 2.0]", "a name"),
        (dict(lr_schedule={"type": "choice", "values": ["wsd", "wsd"]}), "['wsd', 'wsd']",
         "lists a value twice"),
        (dict(output_mult={"type": "choice", "values": ["cosine", "wsd"]}),
         "['cosine', 'wsd']", "choice values must be numbers, got 'cosine'"),
    ]
    for space, value, rule in bad:
        (name,) = space
        with config_error(f"search.space.{name}", value, rule):
            parse_config(_cfg(**space))
    d = _cfg()
    d["search"]["fixed"] = {"lr_schedule": "cosine"}
    with config_error("search.fixed.lr_schedule", "'cosine'"):
        parse_config(d)
    d = _cfg(output_mult={"type": "choice", "values": [1, "cosine"]})       # mixed
    with pytest.raises(ConfigError, match=r"search\.space\.output_mult"):
        parse_config(d)


def test_every_searcher_draws_names_as_names():
    cfg = parse_config(_cfg(lr_schedule=SCHEDULES))
    pts = sample_configs(cfg.search, 7, 0)
    assert {p["lr_schedule"] for p in pts} <= {"constant", "cosine", "wsd"}
    assert all(isinstance(p["lr"], float) for p in pts)
    assert "lr_schedule=" in describe(pts[0]) and describe(pts[0]).count("=") == 2
    grid = grid_points(cfg.search.model_copy(update={"grid_points": 2}))
    assert len(grid) == 6 and {g["lr_schedule"] for g in grid} == {"constant", "cosine", "wsd"}
    tpe = make_searcher(cfg.search.model_copy(update={"searcher": "tpe", "num_samples": 6}),
                        sweep_seed=3, width_index=0)
    drawn = [tpe.suggest(f"t{i}") for i in range(6)]
    assert all(d["lr_schedule"] in {"constant", "cosine", "wsd"} for d in drawn)


def test_a_trials_schedule_name_reaches_its_scheduler(tiny_config):
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.training.schedule import lr_factor, make_lr_schedule

    task = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    mine = task.for_point({"lr": 0.01, "lr_schedule": "cosine"})
    assert mine.train.lr_schedule == "cosine" and task.train.lr_schedule == "constant"
    opt = mine.optimizer(mine.build(32, {"lr": 0.01}), 0.01)
    sched = make_lr_schedule(opt, mine.train, 10)
    for _ in range(5):
        opt.step()
        sched.step()
    # update 5 of 10 under the cosine: every group at the cosine's factor of its own
    # starting rate (not the constant schedule's 1)
    factor = lr_factor(5, 10, kind="cosine")
    assert factor < 0.5
    assert [g["lr"] for g in opt.param_groups] == pytest.approx(
        [g["initial_lr"] * factor for g in opt.param_groups])


def test_a_name_is_judged_at_matched_numeric_values_not_by_where_its_trials_fell():
    """cosine is 0.3 better at every learning rate, but most of its trials fell at poor
    rates: its raw best-3 mean loses to constant, the fixed-effects fit does not."""
    rng = np.random.default_rng(0)
    hp, rung = {}, {}
    for i in range(30):
        sch = "cosine" if i % 2 else "constant"
        # cosine's trials far from the optimum (log lr −4.6) but two; constant's near it
        log_lr = (rng.uniform(-7, -6) if i % 2 and i > 4 else rng.uniform(-5.2, -4.0))
        hp[f"t{i}"] = {"lr": math.exp(log_lr), "lr_schedule": sch}
        rung[f"t{i}"] = ((log_lr + 4.6) ** 2 + (0.0 if sch == "cosine" else 0.3)
                         + float(rng.normal(0, 0.02)))
    rung["t30"] = math.nan
    hp["t30"] = {"lr": 0.5, "lr_schedule": "wsd"}
    names = ["constant", "cosine", "wsd"]
    naive = {v: e["score"] for v, e in best_choice("lr_schedule", names, hp, rung,
                                                   mode="min")[1]["per_name"].items()}
    assert naive["constant"] < naive["cosine"]       # where the trials fell decides the naive
    name, ev = best_choice("lr_schedule", names, hp, rung, mode="min", numeric=["lr"],
                           n_boot=100, seed=1)
    assert name == "cosine" and ev["method"] == "fixed-effects quadratic"
    assert ev["n_trials"] == 30 and ev["n_boot_used"] >= 90
    per = ev["per_name"]
    assert per["cosine"]["effect"] == 0.0 and per["cosine"]["p_best"] > 0.95
    assert per["constant"]["effect"] == pytest.approx(0.3, abs=0.05)
    lo, hi = per["constant"]["effect_interval"]
    assert 0 < lo < 0.3 < hi
    assert per["wsd"] == {"n_trials": 0, "top_k": 0, "score": None, "best": None,
                          "spread": None, "effect": None, "effect_interval": None,
                          "p_best": 0.0}
    # max mode: higher is better, effects are ≤ 0 against the chosen name
    flipped = {k: -v for k, v in rung.items()}
    name, ev = best_choice("lr_schedule", names, hp, flipped, mode="max", numeric=["lr"],
                           n_boot=0)
    assert name == "cosine" and ev["per_name"]["constant"]["effect"] == pytest.approx(
        -0.3, abs=0.05)
    assert ev["per_name"]["constant"]["effect_interval"] is None      # no bootstrap
    assert best_choice("lr_schedule", ["wsd"], hp, rung, mode="min")[0] is None
    with pytest.raises(ValueError, match="mode"):
        best_choice("lr_schedule", names, hp, rung, mode="lowest")


def test_too_few_trials_for_the_fit_fall_back_to_each_names_best_trials():
    hp = {f"a{i}": {"lr": 0.01 * (i + 1), "lr_schedule": "cosine"} for i in range(3)}
    hp |= {f"b{i}": {"lr": 0.01 * (i + 1), "lr_schedule": "constant"} for i in range(2)}
    rung = {"a0": 1.0, "a1": 1.1, "a2": 1.2, "b0": 1.5, "b1": 1.4}
    name, ev = best_choice("lr_schedule", ["constant", "cosine"], hp, rung, mode="min",
                           numeric=["lr"])
    assert name == "cosine" and ev["method"] == "top-k mean"     # 5 trials < 4 params + 2
    # constant has 2 trials: both names are averaged over their best 2
    assert ev["per_name"]["cosine"] == {"n_trials": 3, "top_k": 2,
                                        "score": pytest.approx(1.05), "best": 1.0,
                                        "spread": pytest.approx(0.0707, rel=1e-3)}
    assert ev["per_name"]["constant"]["score"] == pytest.approx(1.45)
    # a name's one lucky trial is compared with the other's one best, not with a mean of 3
    rung = {"a0": 1.0, "a1": 1.9, "a2": 2.0, "b0": 1.2}
    hp.pop("b1")
    assert best_choice("lr_schedule", ["constant", "cosine"], hp, rung, mode="min",
                       numeric=["lr"])[0] == "cosine"


def _outcome(schedule_penalty, true_log_lr, n=24, seed=0):
    """A width's synthetic rung: loss = (log lr − true)² + the schedule's penalty + noise."""
    rng = np.random.default_rng(seed)
    trials, rung = [], {}
    names = list(schedule_penalty)
    for i in range(n):
        lr = float(np.exp(rng.uniform(math.log(1e-3), math.log(1e-1))))
        sch = names[i % len(names)]
        key = f"t{i}"
        trials.append(SimpleNamespace(key=key, trial_id=100 + i,
                                      point={"hparams": {"lr": lr, "lr_schedule": sch}}))
        rung[key] = ((math.log(lr) - true_log_lr) ** 2 + schedule_penalty[sch]
                     + float(rng.normal(0, 0.01)))
    core = SimpleNamespace(rung_values=lambda: {27: dict(rung)})
    best = min(rung, key=rung.get)
    return SimpleNamespace(trials=trials, core=core), BestTrial(best, 27, rung[best], n)


def test_the_optimum_chooses_the_name_and_fits_the_numbers_without_it():
    cfg = parse_config(_cfg(lr_schedule=SCHEDULES))
    outcome, best = _outcome({"constant": 0.5, "cosine": 0.0, "wsd": 0.2}, math.log(0.01))
    opt = width_optimum(cfg, outcome, best, milestone=27)
    assert opt.optimum["lr_schedule"] == "cosine"
    assert opt.method != "best-trial"          # 24 trials ≥ 2·1 + 3: the lr quadratic
    assert opt.optimum["lr"] == pytest.approx(0.01, rel=0.35)
    assert opt.interval["lr_schedule"] is None and opt.on_edge["lr_schedule"] is False
    ev = opt.choices["lr_schedule"]
    assert ev["method"] == "fixed-effects quadratic" and ev["n_trials"] == 24
    per = ev["per_name"]
    assert all(e["n_trials"] == 8 for e in per.values())
    assert per["wsd"]["effect"] == pytest.approx(0.2, abs=0.03)
    assert per["constant"]["effect"] == pytest.approx(0.5, abs=0.03)
    assert per["cosine"]["score"] < per["wsd"]["score"] < per["constant"]["score"]


def test_rules_report_plot_and_export_carry_names(tmp_path):
    from rich.console import Console

    from mutune.services.report.plots import plot_transfer
    from mutune.services.report.render import render_report

    cfg = parse_config(_cfg(lr_schedule=SCHEDULES))
    optima = []
    for sch, lr in (("cosine", 0.01), ("wsd", 0.011), ("wsd", 0.0095)):
        optima.append({"optimum": {"lr": lr, "lr_schedule": sch},
                       "interval": {"lr": [lr * 0.8, lr * 1.2], "lr_schedule": None},
                       "on_edge": {"lr": False, "lr_schedule": False},
                       "edge_side": {"lr": None, "lr_schedule": None},
                       "choices": {"lr_schedule": {
                           "method": "fixed-effects quadratic", "n_trials": 10,
                           "n_boot_used": 200, "per_name": {
                               sch: {"n_trials": 5, "top_k": 3, "score": 1.0, "best": 0.9,
                                     "spread": 0.1, "effect": 0.0,
                                     "effect_interval": [0.0, 0.0], "p_best": 0.9},
                               "constant": {"n_trials": 5, "top_k": 3, "score": 1.2,
                                            "best": 1.1, "spread": 0.1, "effect": 0.2,
                                            "effect_interval": [0.1, 0.3], "p_best": 0.1}}}}})
    rules, hp, _ = transfer_rules(cfg, [64, 128, 256],
                                  [WidthOptimum.from_json(o) for o in optima])
    by = {r["hyperparameter"]: r for r in rules}
    ch = by["lr_schedule"]
    assert ch["verdict"] == "per_choice" and ch["optima"] == ["cosine", "wsd", "wsd"]
    assert hp["lr_schedule"] == "wsd" == ch["transferred_value"]
    assert ch["transferred_interval"] is None and ch["slope"] is None
    assert "the widths chose differently" in ch["reason"]
    assert ch["choice_evidence"][0] == optima[0]["choices"]["lr_schedule"]
    report = {"sweep_id": 1, "name": "t", "status": "completed", "device_kind": "cpu",
              "proxies": [], "rules": [{**r, "transferred_interval": r["transferred_interval"]}
                                       for r in rules],
              "target": {"width": 1024, "config": hp, "val_loss": 1.0, "status": "completed"},
              "cost": {}}
    buf = io.StringIO()
    render_report(report, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "lr_schedule=wsd" in text and "per_choice" in text
    assert ("width 64: fixed-effects quadratic over 10 trials: cosine chosen (p_best 0.90, "
            "5 trials); constant +0.2 [0.1, 0.3] (p_best 0.10, 5 trials)") in text
    assert plot_transfer(report, tmp_path / "t.png").stat().st_size > 0


def test_the_export_snippet_takes_the_searched_recipe(tiny_config):
    from mutune.services.export.hparams import _recipe, _snippet

    hp = {"lr": 0.01, "output_mult": 2.0, "beta1": 0.8, "lr_schedule": "wsd",
          "grad_clip": 0.5}
    assert _recipe(tiny_config, hp).lr_schedule == "wsd"
    text = _snippet(tiny_config, 256, 3, hp, {"weight_decay": 0.0})
    assert "model = build(width=256, depth=3, output_mult=2.0)" in text   # model knobs only
    assert "betas=(0.8, 0.999)" in text and "schedule: wsd" in text
    assert "clip_grad_norm_(model.parameters(), 0.5)" in text


def test_the_dashboard_shows_a_name_as_it_is():
    from mutune.services.server.dashboard import fmt

    assert fmt("cosine") == "cosine" and fmt(0.0123456) == "0.01235"
    assert fmt(None) == "n/a" and fmt(float("nan")) == "nan"


def test_a_later_rung_that_disagrees_with_the_choice_is_said():
    from mutune.pipeline.choice_optimum import late_disagreement as _late_disagreement
    from mutune.services.report.formatting import choice_line

    hp = {"a": {"lr_schedule": "constant"}, "b": {"lr_schedule": "cosine"}}
    rungs = {20: {"a": 1.0, "b": 1.2}, 60: {"a": 0.9, "b": 0.5}}
    assert _late_disagreement("lr_schedule", "constant", rungs, 20, hp, "min") == {
        "late_rung": 60, "late_best": "cosine"}
    assert _late_disagreement("lr_schedule", "cosine", rungs, 20, hp, "min") == {}
    assert _late_disagreement("lr_schedule", "constant", rungs, 60, hp, "min") == {}
    ev = {"method": "fixed-effects quadratic", "n_trials": 12, "milestone": 20,
          "metric": "val_loss", "late_rung": 60, "late_best": "cosine",
          "per_name": {"constant": {"n_trials": 6, "effect": 0.0, "p_best": 0.7},
                       "cosine": {"n_trials": 6, "effect": 0.36,
                                  "effect_interval": [-0.99, 2.9], "p_best": 0.3}}}
    assert choice_line(ev) == (
        "fixed-effects quadratic over 12 trials at rung 20: constant chosen (p_best 0.70, "
        "6 trials); cosine +0.36 val_loss [-0.99, 2.9] (p_best 0.30, 6 trials) — but the best "
        "trial at rung 60 used cosine: a schedule's effect shows late in a run; check the "
        "choice at full length")
