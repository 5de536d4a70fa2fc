"""The coord check and transfer check commands on tiny settings (real models, real Ray)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mutune.services.cli import app


def test_coord_check_cli_writes_json_and_png(tmp_path):
    out = CliRunner().invoke(app, ["coord-check", "--widths", "64,128,256", "--seeds", "2",
                                   "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "coord_check.json").read_text())
    assert set(data["mup"]["slopes"]) == set(data["sp"]["slopes"]) >= {"readout"}
    assert data["sp"]["slopes"]["readout"] > 0.5
    assert (tmp_path / "coord_check.png").stat().st_size > 10_000
    assert "readout" in out.output


@pytest.mark.slow
def test_transfer_check_grid_through_ray(ray_local, tiny_config, tmp_path):
    from mutune.pipeline.preflight import run_transfer_check
    from mutune.pipeline.recording import MemoryRecorder

    rec = MemoryRecorder()
    res = run_transfer_check(tiny_config, rec, widths=[16, 64], log2_lrs=[-9, -7, -5, -3],
                             seeds=2, steps=9, out_dir=tmp_path)
    assert set(res["mup"]["optimum_log2_lr"]) == {"16", "64"}
    assert -9 <= res["mup"]["optimum_log2_lr"]["16"] <= -3
    assert res["mup"]["spread_octaves"] >= 0
    assert "drift_octaves" in res["sp"]
    # 2 parametrizations × 2 widths × 4 LRs trials (2 replicate seeds each), run to 9 steps
    finished = rec.of("trial_finished")
    assert len(finished) == 16 and all(f["timing"]["steps"] == 9 for f in finished)
    reports = rec.of("trial_reported")
    assert all(r["metrics"]["replicates"] == 2 for r in reports)
    saved = json.loads((tmp_path / "transfer_check.json").read_text())
    assert saved["sp"]["drift_octaves"] == pytest.approx(res["sp"]["drift_octaves"])
    assert (tmp_path / "transfer_check.png").stat().st_size > 10_000
