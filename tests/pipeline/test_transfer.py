"""The transfer stage: from per-width optima to rules, verdicts and the target's settings."""
from __future__ import annotations

import math

import pytest

from mutune.config import load_config, parse_config
from mutune.pipeline.optimum_record import WidthOptimum
from mutune.scaling.pooled import pool_optima
from mutune.pipeline.transfer_stage import target_train_settings, transfer_rules
from tests.conftest import MLP_DIGITS


def _cfg(**over):
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["search"]["space"] = {"lr": d["search"]["space"]["lr"]}
    d["transfer"]["n_boot"] = 200
    for path, v in over.items():
        node = d
        *head, last = path.split(".")
        for k in head:
            node = node[k]
        node[last] = v
    return parse_config(d)


def _optima(lrs, rel=0.3):
    return [WidthOptimum.from_json({"optimum": {"lr": v},
                                    "interval": {"lr": [v * (1 - rel), v * (1 + rel)]},
                                    "on_edge": {"lr": False}, "edge_side": {"lr": None}})
            for v in lrs]


def test_mup_flat_when_exponent_not_resolved_uses_widest_optimum():
    cfg = _cfg()
    rules, hp, _ = transfer_rules(cfg, [64, 128, 256], _optima([0.010, 0.008, 0.012]))
    (r,) = rules
    assert r["slope_interval"][0] < 0 < r["slope_interval"][1]
    assert r["transfer_form"].startswith("flat")
    assert hp["lr"] == pytest.approx(0.012) and r["transferred_value"] == pytest.approx(0.012)
    # the target's interval pools the three widths' optima (they agree within their errors)
    opt = [0.010, 0.008, 0.012]
    pooled = pool_optima(opt, [(v * 0.7, v * 1.3) for v in opt])
    assert r["transferred_interval"] == pytest.approx(list(pooled.interval))
    assert r["pooled_optimum"]["n_widths"] == 3
    assert "pools every size's optimum" in r["transfer_form"]
    assert r["verdict"] in {"stable", "noisy"}


def test_resolved_exponent_and_sp_use_the_power_law():
    lrs = [0.02 * (w / 64) ** -1.0 for w in (64, 128, 256, 512)]
    for par in ("mup", "sp"):
        cfg = _cfg(**{"model.parametrization": par})
        rules, hp, _ = transfer_rules(cfg, [64, 128, 256, 512], _optima(lrs, rel=0.02))
        (r,) = rules
        assert r["transfer_form"] == "power law in width"
        assert r["slope"] == pytest.approx(-1.0, abs=0.05)
        assert hp["lr"] == pytest.approx(0.02 * 64 / cfg.target.width, rel=0.1)
    assert r["verdict"] == "sp_corrected"


def test_published_rules_change_target_lr_batch_and_weight_decay():
    cfg = _cfg(**{"target.batch_size": 256, "train.weight_decay": 0.1,
                  "transfer.token_beta": 0.5, "target.steps": 800})
    s = target_train_settings(cfg, 0.01)
    # Adam: square-root batch rule ×2, then tokens 200·64 → 800·256 (16×) at β 0.5: ×1/4
    assert s["lr"] == pytest.approx(0.01 * 2 / 4)
    assert s["batch_size"] == 256
    assert [a["rule"].split()[0] for a in s["adjustments"]] == ["batch", "samples", "AdamW"]
    # the AdamW timescale τ = B/(η·λ·D) is kept: B/(η λ D) equal before and after
    tau = lambda lr, wd, d, b: b / (lr * wd * d)  # noqa: E731
    assert tau(s["lr"], s["weight_decay"], 800 * 256, 256) == pytest.approx(
        tau(0.01, 0.1, 200 * 64, 64))
    assert target_train_settings(_cfg(), 0.01)["adjustments"] == []
    assert math.isfinite(s["weight_decay"])


def _synthetic_outcome(n_trials: int, log_lr_star: float, top_rung_trials: int):
    """A real ASHA core fed a deterministic loss (log lr − log lr*)² + 1/step. Trials arrive
    worst first, so each newcomer leads its rung and continues; only the first
    ``top_rung_trials`` go on to the top rung (80 steps), the others end at rung 40."""
    from mutune.search.schedulers.asha import ASHA
    from mutune.search.backends.trial_record import TrialRecord
    from mutune.search.backends.groups import RunOutcome

    core = ASHA(grace_period=20, reduction_factor=2, max_t=80)
    trials, grid = [], [log_lr_star + 3.0 * (k / (n_trials - 1) - 0.5) for k in range(n_trials)]
    order = sorted(range(n_trials), key=lambda k: -abs(grid[k] - log_lr_star))
    reached_top = 0
    for k in order:
        key = f"t{k}"
        trials.append(TrialRecord(key, k + 1, {"hparams": {"lr": math.exp(grid[k])}}, 0.0))
        for step in (20, 40, 80):
            if step == 80 and reached_top >= top_rung_trials:
                break
            js = core.on_report(key, step, (grid[k] - log_lr_star) ** 2 + 1.0 / step)
            if any(j.decision.value in ("stop", "diverged") for j in js):
                break
            reached_top += step == 80
    return RunOutcome(trials, core)


def test_common_rung_aligns_widths_at_equal_budget():
    from mutune.search.best import best_at_rung
    from mutune.pipeline.transfer_stage import common_rung, width_optimum

    cfg = _cfg()        # lr only: a rung needs 2·1 + 3 = 5 finite trials for the fit
    rich = _synthetic_outcome(24, math.log(0.01), top_rung_trials=6)
    poor = _synthetic_outcome(24, math.log(0.01), top_rung_trials=3)
    own = [width_optimum(cfg, o, best_at_rung(o.core.rung_values(), mode="min",
                                              min_trials=3)).milestone
           for o in (rich, poor)]
    assert own == [80, 40]                      # each width alone picks a different rung
    assert common_rung(cfg, [rich, poor]) == 40
    opt = width_optimum(cfg, rich, best_at_rung(rich.core.rung_values(), mode="min",
                                                min_trials=3), milestone=40)
    assert opt.milestone == 40 and opt.n_trials == len(rich.core.rung_values()[40])
    assert math.log(opt.optimum["lr"]) == pytest.approx(math.log(0.01), abs=0.05)
    # a rung too thin for the fit is not used even when asked for
    thin = width_optimum(cfg, poor, best_at_rung(poor.core.rung_values(), mode="min",
                                                 min_trials=3), milestone=80)
    assert thin.milestone == 40
    assert common_rung(cfg, [rich, _synthetic_outcome(4, 0.0, top_rung_trials=1)]) is None


def _surfaced(lrs, rel, curvature):
    """Optima with a fitted loss surface at max_t (curvature per (log lr)², loss 2.5 nats)."""
    return [WidthOptimum.from_json({"optimum": {"lr": v}, "optimum_horizon": "max_t",
                                    "interval": {"lr": [v * (1 - rel), v * (1 + rel)]},
                                    "on_edge": {"lr": False}, "edge_side": {"lr": None},
                                    "curvature": {"lr": curvature}, "fitted_loss": 2.5})
            for v in lrs]


def test_a_flat_rule_is_judged_on_the_pooled_interval_not_the_extrapolated_slope():
    """Three widths agreeing within their errors: the slope's interval, extrapolated 4× beyond
    the widest, spans octaves, but the pooled optima place the target's optimum closely, and
    the stake is read across that interval."""
    cfg = _cfg(**{"target.width": 4096})
    opt = [0.010, 0.008, 0.012]
    (r,), _, _ = transfer_rules(cfg, [64, 128, 256], _surfaced(opt, 0.3, 0.05))
    pooled = pool_optima(opt, [(v * 0.7, v * 1.3) for v in opt])
    far = max(abs(math.log(0.012 / pooled.interval[0])),
              abs(math.log(pooled.interval[1] / 0.012)))
    assert r["loss_at_stake"]["log_distance"] == pytest.approx(far)
    assert r["loss_at_stake"]["relative"] == pytest.approx(0.5 * 0.05 * far ** 2 / 2.5)
    assert r["verdict"] == "stable", r["reason"]
    # the same optima judged on a steep surface: the same interval costs more than 0.5 %
    (steep,), _, _ = transfer_rules(cfg, [64, 128, 256], _surfaced(opt, 0.3, 2.0))
    assert steep["verdict"] == "noisy" and steep["loss_at_stake"]["relative"] > 0.005
