"""The coord check and transfer check commands on tiny settings (real models, real Ray)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mutune.services.cli import app
from tests.conftest import MLP_DIGITS


def test_coord_check_cli_writes_json_and_png(tmp_path):
    out = CliRunner().invoke(app, ["coord-check", str(MLP_DIGITS), "--widths", "64,128,256",
                                   "--seeds", "2", "--out", str(tmp_path)],
                             env={"COLUMNS": "200"})
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


def _residual_config(tiny_config):
    from mutune.config import parse_config

    d = tiny_config.model_dump(mode="json")
    d["model"].update(residual=True, depth=2)
    return parse_config(d)


def test_coord_check_across_depth_keeps_completep_flat_and_shows_none_grow(tiny_config,
                                                                          tmp_path):
    from mutune.pipeline.depth_check import run_depth_coord_check

    cfg = _residual_config(tiny_config)
    table = run_depth_coord_check(cfg, width=32, depths=[2, 4, 8], lr=2 ** -6, seeds=(0, 1),
                                  out_dir=tmp_path)
    assert table["axis"] == "depth" and table["completep"]["depths"] == [2, 4, 8]
    roles = set(table["completep"]["slopes"])
    # modules compared by role: the first and last block, never a middle one
    assert {"input", "hidden.first", "hidden.last", "readout"} <= roles
    assert not any(".1" in r or ".3" in r for r in roles)
    assert max(table["completep"]["slopes"].values()) < 0.1     # CompleteP: nothing grows
    # without depth scaling the residual stream grows with depth, and the readout with it
    assert table["none"]["slopes"]["readout"] > table["completep"]["slopes"]["readout"] + 0.2
    for par in ("completep", "none"):      # each slope with its interval over the 2 seeds
        for role, (lo, hi) in table[par]["slope_intervals"].items():
            assert lo < hi, (par, role)
    assert json.loads((tmp_path / "coord_check.json").read_text())["settings"]["width"] == 32
    assert (tmp_path / "coord_check.png").stat().st_size > 10_000


def test_depth_checks_refuse_a_model_without_residual_branches(tiny_config, tmp_path):
    from mutune.errors import ConfigError
    from mutune.pipeline.depth_check import run_depth_coord_check

    with pytest.raises(ConfigError, match="residual"):       # the plain MLP has no branches
        run_depth_coord_check(tiny_config, width=32, depths=[2, 4], lr=1e-2, out_dir=tmp_path)
    with pytest.raises(ConfigError, match="at least 2 distinct depths"):
        run_depth_coord_check(_residual_config(tiny_config), width=32, depths=[4, 4],
                              lr=1e-2, out_dir=tmp_path)


def test_depth_transfer_check_refuses_a_bad_model_before_creating_the_database(tiny_config,
                                                                              tmp_path):
    import yaml

    cfg = tmp_path / "plain.yaml"          # the plain MLP: no residual branches to scale
    cfg.write_text(yaml.safe_dump(tiny_config.model_dump(mode="json")))
    db = tmp_path / "x.db"
    out = CliRunner().invoke(app, ["transfer-check", str(cfg), "--axis", "depth", "--db",
                                   f"sqlite:///{db}", "--out", str(tmp_path / "o")])
    assert out.exit_code != 0 and "model.residual = False" in out.output
    assert not db.exists()
    out = CliRunner().invoke(app, ["coord-check", str(cfg), "--axis", "height"])
    assert out.exit_code != 0 and "use width or depth" in out.output


@pytest.mark.slow
def test_depth_transfer_check_runs_every_depth_and_parametrization_in_one_ray_run(
        ray_local, tiny_config, tmp_path):
    from mutune.pipeline.depth_transfer import DepthGrid, run_depth_transfer_check
    from mutune.pipeline.recording import MemoryRecorder

    rec = MemoryRecorder()
    cfg = _residual_config(tiny_config)
    res = run_depth_transfer_check(cfg, rec, width=16, out_dir=tmp_path, grid=DepthGrid(
        [2, 6], [-9, -7, -5, -3], seeds=2, steps=9, n_boot=100))
    assert res["axis"] == "depth" and res["depths"] == [2, 6]
    for par in ("completep", "depth_mup", "none"):
        e = res[par]
        assert set(e["optimum_log2_lr"]) == set(e["optimum_log2_lr_interval"]) == {"2", "6"}
        assert e["rule"]["axes"] == ["depth"]
        assert e["rule"]["verdicts"]["depth"] == "too_few_sizes"      # 2 depths only
        assert e["drift_octaves"] == pytest.approx(e["optimum_log2_lr"]["6"]
                                                   - e["optimum_log2_lr"]["2"])
    # the base depth (2) is the same model under every parametrization
    assert len({res[p]["optimum_log2_lr"]["2"] for p in ("completep", "none")}) == 1
    # (3 parametrizations at depth 6 + the shared base depth) × 4 LRs × 2 seeds, one trial
    # each, one Ray Tune run
    finished = rec.of("trial_finished")
    assert len(finished) == 32 and all(f["timing"]["steps"] == 9 for f in finished)
    assert len(rec.of("proxy_sweep_started")) == 4
    # the depth base is recorded beside the width base shapes (the sweep's config: the
    # deepest depth under the first parametrization, base depth the smallest)
    prov = rec.of("sweep_started")[0]["provenance"]
    assert "base_shapes" in prov and prov["depth_base"] == {
        "depth_parametrization": "completep", "base_depth": 2, "depth": 6, "alpha": 1.0,
        "branch_multiplier": pytest.approx(1 / 3)}
    # each group trained its own model: depth 6 has 4 more residual blocks (16 × 16 each)
    params = {r["metrics"]["n_params"] for r in rec.of("trial_reported")}
    assert len(params) == 2 and max(params) - min(params) == 4 * 16 * 16
    saved = json.loads((tmp_path / "transfer_check.json").read_text())
    assert saved["none"]["spread_octaves"] == pytest.approx(res["none"]["spread_octaves"])
    assert (tmp_path / "transfer_check.png").stat().st_size > 10_000


def test_depth_optima_recover_known_optima_with_intervals_over_seeds():
    import numpy as np

    from mutune.pipeline.depth_check import depth_optima

    rng = np.random.default_rng(0)
    grid = np.arange(-10.0, -1.0)                    # 9 points, one octave apart
    truth = {2: -6.0, 4: -6.5, 8: -7.0}              # half an octave earlier per doubling
    losses = {d: np.stack([0.05 * (grid - t) ** 2 + 1.0 + 0.004 * rng.standard_normal(9)
                           for _ in range(4)], axis=1) for d, t in truth.items()}
    out = depth_optima(grid, losses, n_boot=300, seed=1)
    for d, t in truth.items():
        lo, hi = out["optimum_log2_lr_interval"][d]
        assert lo <= out["optimum_log2_lr"][d] <= hi and abs(out["optimum_log2_lr"][d] - t) < .1
    assert out["slope"] == pytest.approx(-0.5, abs=0.05)
    lo, hi = out["slope_interval"]
    assert lo < -0.5 + 0.05 and hi > -0.5 - 0.05 and hi < 0
    assert out["drift_octaves"] == pytest.approx(-1.0, abs=0.1)
    assert out["spread_octaves"] == pytest.approx(1.0, abs=0.1)
    assert out["n_seeds"] == {2: 4, 4: 4, 8: 4} and out["n_boot"] == 300
    assert all(abs(out["grid_best_log2_lr"][d] - t) <= 0.5 for d, t in truth.items())
    losses[8][:, 0] = np.nan                          # a seed that diverged everywhere
    with pytest.raises(Exception, match="3 finite"):
        depth_optima(grid, losses, n_boot=50)


def test_depth_slope_verdicts_follow_the_width_rules_precedence():
    from mutune.pipeline.depth_check import depth_slope_verdict as v

    assert v([-0.05, 0.05], 2, on_edge=False) == "too_few_sizes"
    assert v([-0.05, 0.05], 3, on_edge=True) == "edge"
    assert v([-0.3, 0.3], 3, on_edge=False) == "noisy"             # wider than 4 × 0.1
    assert v([float("nan"), 0.1], 3, on_edge=False) == "noisy"
    assert v([-0.6, -0.3], 3, on_edge=False) == "drifting"
    assert v([-0.08, 0.09], 3, on_edge=False) == "stable"
    assert v([-0.05, 0.2], 3, on_edge=False) == "noisy"            # straddles +0.1
