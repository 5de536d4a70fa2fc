"""The target watched against its best proxy, the loss law's refusal, and fANOVA importance."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from mutune.config import parse_config
from mutune.pipeline.importance import proxy_importance
from mutune.pipeline.target_stage import divergence_limits, watch_target
from mutune.pipeline.transfer_stage import loss_law
from mutune.search.driver import Group, SweepDriver
from mutune.search.searchers.simple import FixedSearcher

from tests.conftest import make_tiny_config

WATCH = {"width": 64, "seeds": 2, "steps": [10, 20, 30], "val_loss": [2.0, 1.5, 1.2],
         "val_loss_se": [0.01, 0.01, 0.01]}


def test_behind_means_more_than_two_standard_errors_of_the_difference():
    reports = [{"step": 10, "val_loss": 2.02, "val_loss_se": 0.01},    # gap 0.02 < 2·0.014
               {"step": 20, "val_loss": 1.6, "val_loss_se": 0.01},     # gap 0.1: behind
               {"step": 25, "val_loss": 9.0, "val_loss_se": 0.01},     # no proxy value there
               {"step": 30, "val_loss": 1.1, "val_loss_se": 0.01}]     # ahead
    w = watch_target(WATCH, reports, 1024)
    assert w["compared_steps"] == 3 and [b["step"] for b in w["behind_steps"]] == [20]
    assert w["behind_steps"][0]["two_se"] == pytest.approx(2 * math.sqrt(2) * 0.01)
    assert "width 1024" in w["note"] and "width 64" in w["note"] and "step 20" in w["note"]
    assert watch_target(WATCH, reports[:1], 1024)["note"] is None
    assert watch_target(None, reports, 1024) is None


def test_a_target_above_twice_the_proxy_is_stopped_as_diverged():
    """The driver ends a scheduler-less trial whose value at a watched step exceeds the
    limit — twice the best proxy's loss there — as diverged, with the figures."""
    g = Group("target", FixedSearcher([{"lr": 0.1}]), None, 30,
              diverge_above={s: 2 * v for s, v in zip(WATCH["steps"], WATCH["val_loss"])})
    d = SweepDriver([g], concurrency=1)
    act = d.next_action()
    out = d.report(act.key, 10, 3.9)
    assert out.action == "continue"
    out = d.report(act.key, 20, 3.1)                    # > 2 × 1.5, no standard error
    assert out.action == "end" and out.status == "diverged"
    assert "above 3" in out.reason and "twice the best proxy" in out.reason
    g = Group("target", FixedSearcher([{"lr": 0.1}]), None, 30, diverge_above={20: 3.0})
    d = SweepDriver([g], concurrency=1)
    key = d.next_action().key
    assert d.report(key, 20, 3.1, se=0.05).action == "continue"     # within 3 se of it


def test_divergence_allows_for_the_noise_of_small_losses():
    """The limit is twice the proxy's 3-se upper bound, and the target's own value is taken
    3 of its standard errors down first: the MLP example's target at 0.1477 ± 0.054 against a
    proxy at 0.0350 ± 0.012 is noise (measured 2026-12-02); a climb to chance is not."""
    from mutune.search.driver.types import beyond_limit

    watch = {"width": 256, "seeds": 3, "steps": [160, 170], "val_loss": [0.036, 0.035],
             "val_loss_se": [0.012, 0.012]}
    limits = divergence_limits(watch)
    assert limits[170] == pytest.approx(2 * (0.035 + 3 * 0.012))
    assert not beyond_limit(0.1477, 0.054, limits[170])
    assert beyond_limit(1.5, 0.1, limits[170]) and beyond_limit(math.nan, 0.01, limits[170])
    assert beyond_limit(0.2, None, 0.19) and not beyond_limit(0.2, 0.01, 0.19)
    assert divergence_limits({**watch, "val_loss_se": [math.nan, None]}) == pytest.approx(
        {160: 0.072, 170: 0.070})
    assert divergence_limits(None) is None
    g = Group("target", FixedSearcher([{"lr": 0.1}]), None, 200, diverge_above=limits)
    d = SweepDriver([g], concurrency=1)
    key = d.next_action().key
    assert d.report(key, 160, 0.0438, se=0.0118).action == "continue"
    assert d.report(key, 170, 0.1477, se=0.054).action == "continue"


def test_loss_law_says_when_losses_do_not_fall_with_size():
    cfg = make_tiny_config()
    row = loss_law(cfg, [16, 32, 64], [1e3, 4e3, 1.6e4], [0.30, 0.31, 0.29], 6.4e4)
    assert row["falls_with_size"] is False and "do not fall with size" in row["error"]
    assert "predicted_val_loss" not in row
    ok = loss_law(cfg, [16, 32, 64], [1e3, 4e3, 1.6e4], [0.40, 0.30, 0.25], 6.4e4)
    assert ok["falls_with_size"] is True and "error" not in ok


def test_importance_finds_the_hyperparameter_that_matters():
    """fANOVA on trials at one rung: the loss depends on lr only, so lr takes nearly all of
    the variance; too few trials at every rung is said, not guessed."""
    d = make_tiny_config().model_dump(mode="json")
    cfg = parse_config(d)
    rng = np.random.default_rng(0)
    trials, values = [], {}
    for i in range(40):
        hp = {"lr": float(np.exp(rng.uniform(np.log(1e-4), np.log(1e-1)))),
              "output_mult": float(np.exp(rng.uniform(np.log(1 / 16), np.log(16))))}
        trials.append(SimpleNamespace(key=f"w64-t{i}", point={"hparams": hp}))
        values[f"w64-t{i}"] = (math.log10(hp["lr"]) + 2.5) ** 2 + rng.normal(0, 0.01)
    core = SimpleNamespace(rung_values=lambda: {3: values, 9: dict(list(values.items())[:5])})
    row = proxy_importance(cfg, 64, SimpleNamespace(trials=trials, core=core))
    assert row["step"] == 3 and row["n_trials"] == 40
    assert row["importances"]["lr"] > 0.8
    assert sum(row["importances"].values()) == pytest.approx(1.0)
    few = SimpleNamespace(rung_values=lambda: {3: dict(list(values.items())[:5])})
    assert "no rung holds 8" in proxy_importance(cfg, 64, SimpleNamespace(trials=trials,
                                                                          core=few))["error"]


def test_importance_runs_in_a_child_interpreter_that_keeps_sklearn_out_of_the_driver():
    """The same figures as in this process, from a child interpreter; a process that computes
    an importance never imports scikit-learn or scipy itself."""
    import subprocess
    import sys

    from optuna.distributions import FloatDistribution

    from mutune.pipeline.importance import _fanova, _in_child_process

    rng = np.random.default_rng(1)
    params = [{"a": float(a), "b": float(b)} for a, b in rng.uniform(0.1, 1.0, (24, 2))]
    values = [p["a"] ** 2 + 0.01 * p["b"] for p in params]
    dists = {"a": FloatDistribution(0.1, 1.0), "b": FloatDistribution(0.1, 1.0)}
    child = _in_child_process(_fanova, params, values, dists, "minimize", 0)
    assert child == _fanova(params, values, dists, "minimize", 0) and child["a"] > 0.9
    code = ("import sys; from optuna.distributions import FloatDistribution as F; "
            "from mutune.pipeline.importance import _fanova, _in_child_process; "
            f"r = _in_child_process(_fanova, {params!r}, {values!r}, "
            "{'a': F(0.1, 1.0), 'b': F(0.1, 1.0)}, 'minimize', 0); "
            "print(r['a'] > 0.9, sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "True []"
