"""`mutune report --by project`: the ledger summed across sweeps per project, from the DB."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mutune.services.cli import app
from mutune.services.store import Store


def _sweep(store: Store, project: str | None, **figures: float) -> int:
    cfg = {"name": f"s-{project}", **({"cost": {"project": project}} if project else {})}
    sid = store.sweep_started(cfg, 0, {})
    if figures:
        store.ledger_recorded(sid, [{"scope": "sweep", "name": k, "value": v, "unit": "GPU-h"}
                                    for k, v in figures.items()])
    return sid


def test_report_by_project_sums_the_ledger(store_url, tmp_path):
    with Store.open(store_url) as store:
        _sweep(store, "vision", proxy_gpu_hours=1.0, target_gpu_hours=2.0,
               total_gpu_hours=3.0, naive_gpu_hours=10.0, saved_gpu_hours=7.0,
               total_money=0.12, saved_money=0.28)
        _sweep(store, "vision", proxy_gpu_hours=0.5, target_gpu_hours=0.5,
               total_gpu_hours=1.0, naive_gpu_hours=5.0, saved_gpu_hours=4.0)
        _sweep(store, "vision")                      # still running: counted, not priced
        _sweep(store, "text", proxy_gpu_hours=2.0, target_gpu_hours=1.0,
               total_gpu_hours=3.0, naive_gpu_hours=4.0, saved_gpu_hours=1.0)
        _sweep(store, None, total_gpu_hours=0.25)
    out_json = tmp_path / "by_project.json"
    res = CliRunner().invoke(app, ["report", "--by", "project", "--db", store_url,
                                   "--json-out", str(out_json)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rows = {r["project"]: r for r in json.loads(out_json.read_text())["projects"]}
    # a sweep whose config names no project belongs to the default project
    assert list(rows) == ["default", "text", "vision"]
    v = rows["vision"]
    assert (v["sweeps"], v["priced_sweeps"]) == (3, 2)
    assert v["total_gpu_hours"] == pytest.approx(4.0)
    assert v["naive_gpu_hours"] == pytest.approx(15.0)
    assert v["saved_fraction"] == pytest.approx(11.0 / 15.0)
    assert v["total_money"] == pytest.approx(0.12) and rows["text"]["total_money"] is None
    assert rows["text"]["saved_fraction"] == pytest.approx(0.25)
    assert rows["default"]["total_gpu_hours"] == 0.25
    assert rows["default"]["saved_fraction"] is None
    assert "vision" in res.output and "73.3%" in res.output


@pytest.mark.parametrize("args, message", [(["report"], "either a SWEEP_ID or --by"),
                                           (["report", "--by", "owner"], "--by = 'owner'"),
                                           (["report", "1", "--by", "project"], "either")])
def test_report_arguments_are_checked(args, message, tmp_path):
    res = CliRunner().invoke(app, [*args, "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert res.exit_code == 2 and message in res.output
