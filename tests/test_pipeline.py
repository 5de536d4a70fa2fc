"""The main job end to end on tiny settings: real Ray, real mup models, real databases."""
from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

import mutune
from mutune.cli import app

pytestmark = pytest.mark.slow

REQUIRED = {
    "top": {"sweep_id", "device_kind", "proxies", "rules", "target", "cost"},
    "proxy": {"width", "best_config", "best_val_loss", "trials"},
    "rule": {"hyperparameter", "slope", "transferred_value"},
    "target": {"width", "config", "val_loss"},
    "cost": {"proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
             "naive_formula", "saved_gpu_hours", "saved_fraction", "ettr"},
}


def test_main_job_end_to_end(ray_local, tiny_config, store_url, tmp_path):
    result = mutune.run(tiny_config, db=store_url, out_dir=tmp_path / "out", progress=False)
    rep = json.loads(result.report_path.read_text())
    assert rep == json.loads(json.dumps(result.report))
    assert REQUIRED["top"] <= rep.keys()
    assert rep["device_kind"] == "cpu"
    assert [p["width"] for p in rep["proxies"]] == [16, 32]
    for p in rep["proxies"]:
        assert REQUIRED["proxy"] <= p.keys() and p["trials"] == 4
        assert math.isfinite(p["best_val_loss"]) and p["best_val_loss"] < math.log(10)
        # chosen at the highest rung holding >= 3 trials: rung 3 holds all 4 here
        assert p["chosen_rung"] == 3
    rules = {r["hyperparameter"]: r for r in rep["rules"]}
    assert set(rules) == {"lr", "output_mult"}
    lr = rules["lr"]
    # the rule reproduces the per-width optima it was fitted on (2 widths: exact line)
    lo, hi = (p["best_config"]["lr"] for p in rep["proxies"])
    assert lr["slope"] == pytest.approx(math.log(hi / lo) / math.log(2), abs=1e-9)
    assert rep["target"]["width"] == 64
    assert rep["target"]["config"]["lr"] == pytest.approx(lr["transferred_value"])
    assert rep["target"]["val_loss"] < math.log(10)
    c = rep["cost"]
    assert REQUIRED["cost"] <= c.keys()
    assert c["total_gpu_hours"] == pytest.approx(c["proxy_gpu_hours"] + c["target_gpu_hours"])
    assert c["saved_gpu_hours"] == pytest.approx(c["naive_gpu_hours"] - c["total_gpu_hours"])
    assert c["saved_fraction"] == pytest.approx(c["saved_gpu_hours"] / c["naive_gpu_hours"])
    assert 0 < c["ettr"] < 1
    assert result.plot_path.stat().st_size > 10_000

    from mutune.services.store import Store
    with Store.open(store_url) as store:
        n = store.counts(result.sweep_id)
        rows = store.sweep_rows(result.sweep_id)
    assert rows["sweep"]["status"] == "completed"
    assert n["trials"] == 2 * 4 + 1 and n["proxy_sweeps"] == 2
    assert n["trial_reports"] >= 8 and n["scheduler_events"] >= 8
    assert n["transfer_rules"] == 2 and n["target_runs"] == 1 and n["ledger_entries"] >= 9
    target_trial = next(t for t in rows["trials"] if t["kind"] == "target")
    assert [r["step"] for r in target_trial["reports"]] == list(range(3, 28, 3))
    assert all(t["status"] in {"completed", "stopped", "diverged"} for t in rows["trials"])
    assert rows["provenance"]["dataset"]["fingerprint"]
    # every proxy trial has its GPU-hours in the ledger, and they add up to the proxy line
    per_trial = [e["value"] for e in rows["ledger"] if e["scope"] == "trial"]
    assert len(per_trial) == 9
    assert sum(per_trial) == pytest.approx(c["total_gpu_hours"])

    # `mutune report` renders the same figures from the database alone
    out = CliRunner().invoke(app, ["report", str(result.sweep_id), "--db", store_url,
                                   "--json", str(tmp_path / "again.json")],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert json.loads((tmp_path / "again.json").read_text()) == rep
    assert f"{c['proxy_gpu_hours']:.6f}" in out.output
    assert f"{rep['target']['val_loss']:.4g}" in out.output


def test_cli_rejects_a_bad_config_with_field_value_rule(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: {family: mlp}\ndata: {kind: digits}\nwidths: [64]\n"
                   "search: {space: {lr: {type: loguniform, low: 1, high: 0.1}}}\n"
                   "target: {width: 128}\n")
    out = CliRunner().invoke(app, ["run", str(bad), "--db", f"sqlite:///{tmp_path}/x.db"],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 2
    assert "widths = [64]: List should have at least 2 items" in out.output
    assert "search.space.lr = {…}: high (0.1) must be > low (1.0)" in out.output
