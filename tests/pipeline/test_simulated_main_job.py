"""The whole main job on the simulated backend: proxy sweeps, confirmation designs, a gate
round, the target, the ledger and the report, recorded in a real SQLite store, with Ray
unimportable."""
from __future__ import annotations

import io
import json
import math
import sys

import pytest

from mutune.config import parse_config
from mutune.pipeline import run_pipeline
from mutune.search.backends.simulated_run import SimulatedBackend, SyntheticLoss
from mutune.services.report.data import build_report
from mutune.services.report.render import render_report
from mutune.services.store import Store
from tests.conftest import make_tiny_config

#: the surface's optimum: output_mult far above the quickstart's first range, so the first
#: design finds it on the edge and the gate widens it in a round
OPTIMUM = {"lr": 0.01, "output_mult": 1000.0}


@pytest.fixture
def no_ray(monkeypatch):
    """Any ``import ray`` (or of a submodule) raises ModuleNotFoundError in the test."""
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)


def _config():
    d = make_tiny_config().model_dump(mode="json")
    d["widths"], d["target"]["width"] = [16, 32, 64], 256
    d["transfer"]["gate_rounds"] = 1
    return parse_config(d)


def test_main_job_runs_end_to_end_on_the_simulator_without_ray(no_ray, tmp_path):
    with pytest.raises(ModuleNotFoundError):
        import ray  # noqa: F401
    cfg = _config()
    with Store.open(f"sqlite:///{tmp_path / 'sim.db'}") as store:
        result = run_pipeline(cfg, store, out_dir=tmp_path / "out",
                              backend=SimulatedBackend(SyntheticLoss(optimum=OPTIMUM)))
        rows = store.sweep_rows(result.sweep_id)
    assert rows["sweep"]["status"] == "completed"
    kinds = {t["kind"] for t in rows["trials"]}
    assert kinds == {"proxy", "confirm", "target"}
    assert all(t["status"] in ("completed", "stopped") for t in rows["trials"])
    report = build_report(rows)
    # the first design found output_mult on its edge; the gate's round widened it
    gate = report["gate"]
    assert len(gate["rounds"]) == 1 and gate["outcome"] == "passed"
    assert "edge" in gate["first_verdicts"].values()
    # the transferred values land on the surface's optimum (it does not move with width)
    for rule in result.rules:
        want = OPTIMUM[rule["hyperparameter"]]
        assert abs(math.log2(rule["transferred_value"] / want)) < 0.25, rule
    target = result.target
    assert target["status"] == "completed" and target["steps"] == cfg.target_steps
    assert target["model_dir"] is None          # the simulator trains no model
    # the ledger: every trial billed; the saving is the naive sweep less what was spent
    cost = result.cost
    assert cost["total_gpu_hours"] == pytest.approx(cost["proxy_gpu_hours"]
                                                    + cost["target_gpu_hours"])
    assert cost["saved_gpu_hours"] == pytest.approx(cost["naive_gpu_hours"]
                                                    - cost["total_gpu_hours"])
    assert cost["naive_formula"].startswith("devices/3600")
    # the FLOP-based saving: every trained step's model FLOPs (the trials' own ledger lines)
    # against the naive sweep's steps at the target's FLOPs per step
    steps = {t["id"]: t["steps"] for t in rows["trials"]}
    per_step = {e["trial_id"]: e["value"] for e in rows["ledger"]
                if e["scope"] == "trial" and e["name"] == "flops_per_step"}
    assert cost["spent_flops"] == pytest.approx(sum(per_step[i] * steps[i] for i in steps))
    assert cost["saved_flops_fraction"] == pytest.approx(
        1 - cost["spent_flops"] / cost["naive_flops"])
    assert cost["saved_flops_fraction"] < cost["ideal_saved_flops_fraction"] < 1
    assert report["cost"]["saved_flops_fraction"] == pytest.approx(cost["saved_flops_fraction"])
    assert "Kaplan" in report["cost"]["saved_flops_fraction_formula"]
    from rich.console import Console

    buf = io.StringIO()
    render_report(report, Console(file=buf, width=120))
    text = buf.getvalue()
    assert "GPU-h" in text and str(result.sweep_id) in text
    assert "saved fraction (model FLOPs)" in text


def test_the_first_screen_is_read_from_report_json(no_ray, tmp_path):
    from rich.console import Console

    from mutune.services.report.data import write_report_json
    from mutune.services.report.summary import render_summary, summarize

    with Store.open(f"sqlite:///{tmp_path / 'sim.db'}") as store:
        result = run_pipeline(_config(), store, out_dir=tmp_path / "out",
                              backend=SimulatedBackend(SyntheticLoss(optimum=OPTIMUM)))
        report = build_report(store.sweep_rows(result.sweep_id))
    written = json.loads(write_report_json(report, tmp_path / "report.json").read_text())
    s = summarize(written)
    assert s == summarize(report)
    assert s.title == f"mutune sweep {result.sweep_id} ({report['name']}): completed"
    transferred, target, cost = s.answer
    for rule in written["rules"]:
        assert f"{rule['hyperparameter']} = {rule['transferred_value']:.4g} " \
               f"({rule['verdict']}" in transferred
    assert f"target (width {written['target']['width']})" in target
    c = written["cost"]
    assert f"{c['total_gpu_hours']:.4g} GPU-h against {c['naive_gpu_hours']:.4g}" in cost
    assert f"saved {c['saved_fraction']:.1%}" in cost
    assert f"in model FLOPs saved {c['saved_flops_fraction']:.1%}" in cost
    buf = io.StringIO()
    render_summary(written, Console(file=buf, width=400))
    shown = [ln.strip() for ln in buf.getvalue().splitlines()]
    assert shown[0] == s.title and shown[1:1 + len(s.answer)] == s.answer
    assert all(f"- {item}" in shown for item in s.attention)
    assert shown[-1] == f"full tables: mutune report {result.sweep_id} --full"


def test_the_simulated_sweep_is_deterministic(no_ray, tmp_path):
    """Same config, same seed: the same trials, reports and decisions."""
    def once(name):
        with Store.open(f"sqlite:///{tmp_path / name}") as store:
            res = run_pipeline(_config(), store, out_dir=tmp_path / name.replace(".db", ""),
                               backend=SimulatedBackend())
            rows = store.sweep_rows(res.sweep_id)
        return ([(t["key"], t["status"]) for t in rows["trials"]],
                [r["transferred_value"] for r in res.rules])
    assert once("a.db") == once("b.db")
