"""The CLI faces of the store: db upgrade, replay and export on a recorded (synthetic) sweep."""
from __future__ import annotations

import json

import optuna
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
    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--json", str(res)],
                             env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(res.read_text())
    (w,) = data["widths"]
    assert w["width"] == 16 and w["matches_original"] is True
    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--reduction-factor",
                                   "2", "--json", str(res)], env=ENV)
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
