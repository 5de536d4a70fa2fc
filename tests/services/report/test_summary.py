"""The first screen's attention list: which rules, targets and savings it raises, from
report.json-shaped dicts."""
from __future__ import annotations

from mutune.services.report.summary import summarize


def _report(rules, *, target_test=2.0, best_proxy_test=2.2, saved=0.8):
    return {"sweep_id": 3, "name": "lm", "status": "completed", "reason": None,
            "rules": rules,
            "proxies": [{"width": 64, "best_test_loss": best_proxy_test},
                        {"width": 32, "best_test_loss": best_proxy_test + 0.1}],
            "target": {"width": 512, "val_loss": 1.99, "test_loss": target_test,
                       "predicted_val_loss": 2.0, "predicted_val_loss_interval": [1.97, 2.03],
                       "watch": {"note": None}},
            "cost": {"total_gpu_hours": 1.0, "naive_gpu_hours": 5.0, "saved_fraction": saved,
                     "ideal_saved_fraction": 0.9, "saved_flops_fraction": 0.85,
                     "ideal_saved_flops_fraction": 0.92},
            "gate": {}, "preflight": {"warnings": []}}


def _rule(hp, verdict, relative):
    return {"hyperparameter": hp, "transferred_value": 0.01, "verdict": verdict,
            "reason": f"{hp}: why", "loss_tolerance": 0.005,
            "loss_at_stake": {"relative": relative}}


def test_a_healthy_run_needs_no_attention_and_states_its_figures():
    s = summarize(_report([_rule("lr", "stable", 0.002), _rule("output_mult", "drifting",
                                                                0.004)]))
    assert s.attention == []
    transferred, target, cost = s.answer
    assert "lr = 0.01 (stable, 0.2 % of the loss at stake)" in transferred
    assert "9.1 % below the best proxy's 2.2 (width 64)" in target and "inside" in target
    assert "saved 80.0% (ideal 90.0%); in model FLOPs saved 85.0% (ideal 92.0%)" in cost


def test_attention_names_noisy_rules_costly_drifts_a_losing_target_and_a_loss():
    s = summarize(_report([_rule("lr", "noisy", 0.02), _rule("output_mult", "drifting", 0.03),
                           _rule("init_std", "drifting", 0.001)],
                          target_test=2.3, saved=-0.5))
    assert "lr is noisy: why" in s.attention
    assert "output_mult is drifting: why" in s.attention
    assert not any(a.startswith("init_std") for a in s.attention)
    assert "the target is no better than its best proxy on test loss" in s.attention
    assert "the transfer cost more GPU-hours than a naive sweep" in s.attention
