"""The transfer stage: from per-width optima to rules, verdicts and the target's settings."""
from __future__ import annotations

import math

import pytest

from mutune.config import load_config, parse_config
from mutune.transfer import target_train_settings, transfer_rules


def _cfg(**over):
    d = load_config().model_dump(mode="json")
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
    return [{"optimum": {"lr": v}, "interval": {"lr": [v * (1 - rel), v * (1 + rel)]},
             "on_edge": {"lr": False}, "edge_side": {"lr": None}} for v in lrs]


def test_mup_flat_when_exponent_not_resolved_uses_widest_optimum():
    cfg = _cfg()
    rules, hp, _ = transfer_rules(cfg, [64, 128, 256], _optima([0.010, 0.008, 0.012]))
    (r,) = rules
    assert r["slope_interval"][0] < 0 < r["slope_interval"][1]
    assert r["transfer_form"].startswith("flat")
    assert hp["lr"] == pytest.approx(0.012) and r["transferred_value"] == pytest.approx(0.012)
    assert r["transferred_interval"] == pytest.approx([0.012 * 0.7, 0.012 * 1.3])
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
