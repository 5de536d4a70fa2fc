"""A seeded, completed sweep for the dashboard and client tests, written through the store.

The proxy widths come from :func:`tests.services.test_replay_service.record_sweep` (the real
ASHA core on synthetic curves); the rules, the loss law, the target run and the ledger are
recorded with fixed numbers, so a test knows what every page must show.
"""
from __future__ import annotations

from typing import Any

from tests.services.test_replay_service import record_sweep

RULES = [{"hyperparameter": "lr", "intercept": -4.2, "slope": -0.031,
          "slope_interval": [-0.12, 0.058], "transferred_value": 0.0123,
          "transferred_interval": [0.0101, 0.0152], "verdict": "stable",
          "reason": "slope interval contains 0", "widths": [16, 32], "optima": [0.012, 0.0121]}]
TARGET = {"width": 256, "config": {"lr": 0.0123, "output_mult": 2.0}, "val_loss": 0.4321}
COST = {"proxy_gpu_hours": 0.0125, "target_gpu_hours": 0.0042, "total_gpu_hours": 0.0167,
        "naive_gpu_hours": 0.0911, "saved_gpu_hours": 0.0744, "saved_fraction": 0.8167,
        "ettr": 0.91}


class _WithProject:
    """The store, with every new sweep put in ``project``."""

    def __init__(self, store: Any, project: str) -> None:
        self._store, self._project = store, project

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def sweep_started(self, config, seed, provenance):
        return self._store.sweep_started({**config, "project": self._project}, seed,
                                         provenance)


def seed_sweep(store: Any, project: str = "alpha") -> int:
    """Record one completed sweep in ``project``; returns its id."""
    sweep_id, ids = record_sweep(_WithProject(store, project), widths=(16, 32), n=9)
    for rule in RULES:
        store.rule_fitted(sweep_id, rule)
    store.law_fitted(sweep_id, {"kind": "loss_vs_params", "predicted_val_loss": 0.45,
                                "predicted_val_loss_interval": [0.41, 0.5]})
    trial = store.trial_started(sweep_id, None, "target", "target", TARGET["width"],
                                TARGET["config"], 7)
    store.trial_reported(trial, 9, {"val_loss": TARGET["val_loss"]}, 10_000)
    store.trial_finished(trial, "completed", None, {"allocated_s": 15.0, "productive_s": 12.0,
                                                    "eval_s": 1.0, "overhead_s": 2.0,
                                                    "steps": 9, "devices": 1,
                                                    "device_kind": "cpu"})
    target = store.target_started(sweep_id, trial, TARGET["width"], TARGET["config"])
    store.target_finished(target, TARGET["val_loss"], "completed")
    store.ledger_recorded(sweep_id, [{"scope": "sweep", "name": k, "value": v,
                                      "unit": "1" if k in ("saved_fraction", "ettr")
                                      else "GPU-h"} for k, v in COST.items()])
    return sweep_id
