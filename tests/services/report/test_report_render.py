"""The printed report's optimum table: the short-horizon column appears only where a fit ran."""
from __future__ import annotations

import io

from rich.console import Console

from mutune.services.report.render import render_report

HEADER = "lr at target steps (short-horizon fit)"


def _report(horizon):
    def proxy(width, lr):
        return {"width": width, "trials": 8, "confirm_trials": 9, "chosen_rung": 27,
                "best_val_loss": 0.5, "best_test_loss": 0.6, "best_config": {"lr": lr},
                "optimum": {"values": {"lr": lr}, "intervals": {"lr": [lr / 2, lr * 2]},
                            "on_edge": {"lr": False}, "method": "quadratic",
                            "milestone": 27, "trial_ids": list(range(9)), "n_points": 9,
                            "n_seeds": 1, "horizon": horizon}}
    return {"sweep_id": 1, "name": "t", "status": "completed", "device_kind": "cpu",
            "proxies": [proxy(16, 0.01), proxy(32, 0.008)], "rules": [],
            "target": {"width": 64, "config": {"lr": 0.006}, "val_loss": 0.4,
                       "status": "completed"}, "cost": {}}


def _text(report):
    buf = io.StringIO()
    render_report(report, Console(file=buf, width=240))
    return buf.getvalue()


def test_the_short_horizon_column_shows_only_where_a_fit_ran():
    # optima from confirmation designs (the quickstart): no fit, no column of dashes
    assert HEADER not in _text(_report(None))
    text = _text(_report({"extrapolated_lr": 0.0042, "highest_rung_lr": 0.0061}))
    assert HEADER in text and "0.0042 (at the rung: 0.0061)" in text
