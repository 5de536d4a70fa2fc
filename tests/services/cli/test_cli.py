"""The CLI faces of the store: db upgrade, replay and export on a recorded (synthetic) sweep."""
from __future__ import annotations

import json

import optuna
import pytest
from typer.testing import CliRunner

from mutune.services.cli import app
from mutune.services.store import Store
from tests.services.test_replay_service import record_sweep

ENV = {"COLUMNS": "200"}


def test_db_upgrade_is_idempotent(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    for _ in range(2):
        out = CliRunner().invoke(app, ["db", "upgrade", "--db", url], env=ENV)
        assert out.exit_code == 0, out.output
        assert "database at head" in out.output


def test_replay_and_export_commands(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with Store.open(url) as store:
        sweep_id, _ = record_sweep(store, widths=(16,), n=9)
    res = tmp_path / "replay.json"
    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--json-out",
                                   str(res)], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(res.read_text())
    (w,) = data["widths"]
    assert w["width"] == 16 and w["matches_original"] is True
    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--reduction-factor",
                                   "2", "--json-out", str(res)], env=ENV)
    assert out.exit_code == 0, out.output
    assert json.loads(res.read_text())["widths"][0]["matches_original"] is None
    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--scheduler",
                                   "nope"], env=ENV)
    assert out.exit_code == 2 and "scheduler" in out.output

    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    out = CliRunner().invoke(app, ["export", str(sweep_id), "--db", url, "--optuna-storage",
                                   storage], env=ENV)
    assert out.exit_code == 0, out.output
    study = optuna.load_study(study_name=f"mutune-{sweep_id}-w16", storage=storage)
    assert len(study.trials) == 9
    out = CliRunner().invoke(app, ["report", "999", "--db", url], env=ENV)
    assert out.exit_code == 2 and "999" in out.output


def _cells(line: str, sep: str) -> list[str]:
    return [c.strip() for c in line.strip().strip(sep).split(sep)]


def test_replay_compares_productive_hours_and_shows_allocated_apart(tmp_path):
    """The replay's clock prices training + evaluation only, so the column both runs share is
    productive GPU-hours; the original's allocated hours (start-up and idle included) stand
    in their own column, and the caption says what ×N and each column mean."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with Store.open(url) as store:
        sweep_id, _ = record_sweep(store, widths=(16,), n=9)
        trials = store.sweep_rows(sweep_id)["trials"]
    productive = sum(t["productive_s"] + t["eval_s"] for t in trials) / 3600
    allocated = sum(t["allocated_s"] for t in trials) / 3600
    assert allocated > productive * 1.5               # the gap the old table hid

    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--json"])
    assert out.exit_code == 0, out.output
    (w,) = json.loads(out.stdout)["widths"]
    o, r = w["original"], w["replayed"]
    assert o["productive_gpu_hours"] == pytest.approx(productive)
    assert r["productive_gpu_hours"] == pytest.approx(productive)   # same order, same time
    assert o["allocated_gpu_hours"] == pytest.approx(allocated)
    assert o["gpu_hours"] == o["allocated_gpu_hours"]                # kept: allocated

    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    header = _cells(next(ln for ln in lines if "┃" in ln and "GPU-hours" in ln), "┃")
    prod = header.index("GPU-hours (productive)")
    alloc = header.index("allocated GPU-hours (original only)")
    orig = _cells(next(ln for ln in lines if "│ original" in ln), "│")
    rep = _cells(next(ln for ln in lines if "│ replay" in ln), "│")
    assert orig[prod] == rep[prod] == f"{productive:.6f}"
    assert orig[alloc] == f"{allocated:.6f}" and rep[alloc] == "—"
    assert "×2" in orig[header.index("scheduler")]                   # 2 workers recorded
    text = " ".join(out.stdout.split())
    assert ("×N: N trials at once (concurrency: the simulated workers); GPU-hours: productive "
            "(training + evaluation) device-hours, the only time a replay can price; "
            "allocated (original only): what the original sweep held, start-up and idle "
            "included") in text
