"""``mutune list / show / cancel / logs`` on a real results database, and trial output and
cancellation through a real local Ray cluster."""
from __future__ import annotations

import itertools
import json
import re
import time

import pytest
from typer.testing import CliRunner

from mutune.services.cli import app
from mutune.services.store import Store
from tests.services.test_replay_service import record_sweep

ENV = {"COLUMNS": "250"}


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=ENV)


def test_list_show_logs_and_cancel_on_recorded_sweeps(store_url):
    with Store.open(store_url) as store:
        done, ids = record_sweep(store, widths=(16,), n=5)
        running = store.sweep_started({"name": "live", "widths": [8, 16],
                                       "model": {"family": "mlp"}, "target": {"width": 64}},
                                      0, {})
        tid = ids[16][0]
        store.trial_logged(tid, "step 1 ok\n", "a warning\n",
                           "Traceback (most recent call last):\nValueError: boom\n")
    out = _invoke("list", "--db", store_url)
    assert out.exit_code == 0, out.output
    assert "synthetic" in out.output and "live" in out.output and "running" in out.output
    out = _invoke("list", "--db", store_url, "--json")
    listed = json.loads(out.output)
    assert [s["id"] for s in listed] == [running, done]          # newest first
    assert listed[1]["trials"] == 5 and listed[1]["status"] == "completed"
    assert listed[1]["gpu_hours"] > 0 and listed[0]["widths"] == [8, 16]
    out = _invoke("list", "--db", store_url, "--json", "--status", "running")
    assert [s["id"] for s in json.loads(out.output)] == [running]

    out = _invoke("show", str(done), "--db", store_url)
    assert out.exit_code == 0, out.output
    for t in ids[16]:
        assert re.search(rf"│\s*{t}\s*│\s*proxy\s*│\s*16\s*│", out.output), t
    assert "completed" in out.output and "stopped" in out.output

    out = _invoke("logs", str(tid), "--db", store_url)
    assert out.exit_code == 0, out.output
    assert "step 1 ok" in out.output and "a warning" in out.output
    assert "ValueError: boom" in out.output
    out = _invoke("logs", str(ids[16][1]), "--db", store_url)
    assert out.exit_code == 0 and "no output recorded" in out.output

    out = _invoke("cancel", str(running), "--db", store_url)
    assert out.exit_code == 0, out.output
    with Store.open(store_url) as store:
        assert store.stop_requested(running).startswith("cancelled by user")
        assert store.stop_requested(done) is None
    assert "cancel requested" in _invoke("list", "--db", store_url).output
    out = _invoke("cancel", str(done), "--db", store_url)
    assert out.exit_code == 2 and "completed, not running" in out.output
    for cmd in ("show", "cancel", "logs"):
        out = _invoke(cmd, "987654", "--db", store_url)
        assert out.exit_code == 2 and "987654" in out.output, (cmd, out.output)


# ---------------------------------------------------------------- piped output, --json, no new DB
NARROW = {"COLUMNS": "80"}      # a narrow setting; output that is not a terminal ignores it


@pytest.fixture
def seeded(tmp_path):
    """A SQLite results database with one recorded (synthetic) sweep: (url, sweep id, rows)."""
    url = f"sqlite:///{tmp_path / 'seeded.db'}"
    with Store.open(url) as store:
        sweep_id, _ = record_sweep(store, widths=(16,), n=5)
        rows = store.sweep_rows(sweep_id)
    return url, sweep_id, rows


def _config_texts(config: dict) -> list[str]:
    """``name=value`` as ``mutune show`` writes each hyperparameter."""
    return [f"{k}={v:.4g}" for k, v in sorted(config.items())]


def test_piped_output_never_cuts_a_name_or_a_number(seeded):
    url, sweep_id, rows = seeded
    out = CliRunner().invoke(app, ["show", str(sweep_id), "--db", url], env=NARROW)
    assert out.exit_code == 0, out.output
    assert "…" not in out.output
    for t in rows["trials"]:              # every trial's whole config, on one line
        line = next(ln for ln in out.output.splitlines() if re.search(rf"│\s*{t['id']}\s*│", ln))
        assert " ".join(_config_texts(t["config"])) in line, line

    out = CliRunner().invoke(app, ["list", "--db", url], env=NARROW)
    assert out.exit_code == 0 and "…" not in out.output, out.output
    (summary,) = json.loads(CliRunner().invoke(app, ["list", "--db", url, "--json"]).stdout)
    assert f"{summary['gpu_hours']:.6f}" in out.output
    assert "widths → target" in out.output and "finished (UTC)" in out.output

    out = CliRunner().invoke(app, ["report", str(sweep_id), "--db", url, "--full"],
                             env=NARROW)
    assert out.exit_code == 0 and "…" not in out.output, out.output
    (proxy,) = json.loads(CliRunner().invoke(app, ["report", str(sweep_id), "--db", url,
                                                   "--json"]).stdout)["proxies"]
    best = " ".join(f"{k}={v:.4g}" for k, v in sorted(proxy["best_config"].items()))
    assert best in out.output and "output_mult=" in best and "weight_decay=" in best
    assert "best val loss (nats)" in out.output

    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url], env=NARROW)
    assert out.exit_code == 0 and "…" not in out.output, out.output
    assert "GPU-hours (productive)" in out.output and "output_mult=" in out.output


def test_json_flag_prints_machine_readable_json(seeded, tmp_path):
    from mutune.services.report import build_report

    url, sweep_id, rows = seeded
    out = CliRunner().invoke(app, ["report", str(sweep_id), "--db", url, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == json.loads(json.dumps(build_report(rows)))

    out = CliRunner().invoke(app, ["show", str(sweep_id), "--db", url, "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["sweep"]["id"] == sweep_id and shown["sweep"]["status"] == "completed"
    assert [t["id"] for t in shown["trials"]] == [t["id"] for t in rows["trials"]]
    assert shown["trials"][0]["config"] == rows["trials"][0]["config"]
    assert shown["trials"][0]["last_val_loss"] == pytest.approx(
        float(rows["trials"][0]["reports"][-1]["metrics"]["val_loss"]))
    assert shown["gpu_hours"] == pytest.approx(
        sum(t["allocated_s"] for t in rows["trials"]) / 3600)

    out = CliRunner().invoke(app, ["replay", str(sweep_id), "--db", url, "--json"])
    assert out.exit_code == 0, out.output
    (w,) = json.loads(out.stdout)["widths"]
    assert w["width"] == 16 and w["matches_original"] is True

    out = CliRunner().invoke(app, ["report", "--by", "project", "--db", url, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["by"] == "project"

    # a file is still written with --json-out, beside the tables
    path = tmp_path / "r" / "report.json"
    out = CliRunner().invoke(app, ["report", str(sweep_id), "--db", url, "--json-out",
                                   str(path), "--full"])
    assert out.exit_code == 0 and "Proxy sweeps" in out.stdout, out.output
    assert f"full tables: mutune report {sweep_id} --full" in out.stdout
    # without --full: the summary alone
    out = CliRunner().invoke(app, ["report", str(sweep_id), "--db", url])
    assert out.exit_code == 0 and "Proxy sweeps" not in out.stdout, out.output
    assert out.stdout.startswith(f"mutune sweep {sweep_id} (")
    assert json.loads(path.read_text())["sweep_id"] == sweep_id


@pytest.mark.parametrize("args", [["report", "1"], ["report", "--by", "project"], ["list"],
                                  ["show", "1"], ["logs", "1"], ["replay", "1"],
                                  ["export", "1", "--hparams", "--width", "64"],
                                  ["cancel", "1"], ["token", "list"], ["token", "revoke", "1"],
                                  ["rerun", "1"]])
def test_commands_that_read_never_create_a_database(args, tmp_path):
    db = tmp_path / "nowhere" / "mutune.db"
    out = CliRunner().invoke(app, [*args, "--db", f"sqlite:///{db}"], env=NARROW)
    assert out.exit_code == 2, out.output
    assert "no results database" in out.output and str(db) in out.output, out.output
    assert not db.exists() and not db.parent.exists()


def test_default_database_is_not_created_by_a_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MUTUNE_DB", raising=False)
    out = CliRunner().invoke(app, ["list"])
    assert out.exit_code == 2 and "sqlite:///mutune.db" in out.output, out.output
    assert list(tmp_path.iterdir()) == []


def test_reading_an_unknown_sweep_names_the_database(seeded):
    url, _, _ = seeded
    out = CliRunner().invoke(app, ["report", "987654", "--db", url])
    assert out.exit_code == 2
    assert "987654" in out.output and url.removeprefix("sqlite:///") in out.output


@pytest.mark.slow
def test_failed_trial_traceback_reaches_the_database(ray_local, tiny_config, tmp_path):
    """A trial whose model cannot be built fails in its Ray worker; its traceback is stored
    and ``mutune logs`` prints it. The healthy trial beside it is stored with its (empty)
    output and completes."""
    from mutune.proxies.task import ProxyTask, load_task_data
    from tests.search.runs import run_trials

    url = f"sqlite:///{tmp_path / 'logs.db'}"
    cfg = tiny_config
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    points = [{"hparams": {"lr": 0.01, "output_mult": 1.0}, "seed": 1, "index": 0},
              {"hparams": {"lr": 0.01, "output_mult": -1.0}, "seed": 2, "index": 1}]
    with Store.open(url) as store:
        sweep = store.sweep_started(cfg.model_dump(mode="json"), 0, {})
        out = run_trials(points, task=task, width=16, max_t=6, recorder=store, sweep_id=sweep,
                         proxy_sweep_id=None, kind="proxy", scheduler=None,
                         metric="val_loss", mode="min", ray_cfg=cfg.ray, storage=tmp_path,
                         name="logs", seq=itertools.count(1))
        by_index = {t.point["index"]: t for t in out.trials}
        good, bad = by_index[0], by_index[1]
        assert good.status == "completed" and bad.status == "failed"
        bad_log = store.trial_log(bad.trial_id)
        good_log = store.trial_log(good.trial_id)
    assert "Traceback" in bad_log["traceback"] and "output_mult" in bad_log["traceback"]
    assert "ProxyError" in bad_log["traceback"]
    assert good_log["logged"] and good_log["traceback"] is None
    assert not list((tmp_path / "trial_logs" / "logs").glob("*.json"))  # collected, removed
    res = _invoke("logs", str(bad.trial_id), "--db", url)
    assert res.exit_code == 0 and "output_mult must be a finite number > 0" in res.output


class _CancelAfterReports(Store):
    """The real store, whose user cancels the sweep from another shell after ``n`` reports."""

    n = 2

    def trial_reported(self, trial_id, step, metrics, seq):
        super().trial_reported(trial_id, step, metrics, seq)
        if seq >= self.n:
            sweep_id = self.trial_log(trial_id)["sweep_id"]
            if self.stop_requested(sweep_id) is None:
                self.request_cancel(sweep_id)
                # the driver polls for a cancel at most once a second (CancelStopper.poll_s):
                # hold it here past that, so its next check, in this very step, sees the cancel
                # before Ray can start another of these millisecond trials
                time.sleep(1.1)


@pytest.mark.slow
def test_cancel_stops_a_running_sweep_and_loses_no_trial(ray_local, tiny_config, tmp_path):
    from mutune.config import parse_config
    from mutune.errors import SweepStopped
    from mutune.pipeline import run_pipeline
    from mutune.services.report import build_report
    from mutune.services.store import make_engine, upgrade

    d = tiny_config.model_dump(mode="json")
    d["search"]["scheduler"]["max_t"] = 243     # long enough that the cancel lands mid-run
    # (3·3^k: every rung milestone and max_t fall on an evaluation every 3 steps)
    d["search"]["num_samples"] = 6
    cfg = parse_config(d)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    with _CancelAfterReports(make_engine(url)) as store:
        with pytest.raises(SweepStopped) as stop:
            run_pipeline(cfg, store, out_dir=tmp_path / "out")
        assert stop.value.status == "cancelled" and stop.value.sweep_id is not None
        rows = store.sweep_rows(stop.value.sweep_id)
    report = build_report(rows)
    assert report["status"] == "cancelled"
    assert report["reason"].startswith("cancelled by user")
    assert report["target"] is None and report["rules"] == []
    statuses = [t["status"] for t in rows["trials"]]
    assert "running" not in statuses and "cancelled" in statuses
    # every width runs in one Ray Tune run, the widest's trials first: the cancel lands
    # before width 32 got all its trials, so width 16 never started one
    assert len(statuses) < 6
    assert {t["width"] for t in rows["trials"]} == {32}
    assert all(t["allocated_s"] is not None for t in rows["trials"])
    assert report["cost"]["spent_gpu_hours"] > 0


def test_a_narrow_terminal_wraps_cells_and_never_cuts_a_number(seeded):
    """On an 80-column terminal the tables fold a long cell onto more lines instead of ending
    it with "…": every digit of every figure is still printed."""
    import io

    from rich.console import Console

    from mutune.services.report import build_report, render_report
    from mutune.services.report.listing import render_sweep, render_sweep_list
    from mutune.services.store import Store
    from mutune.services.stored_replay import render_replay, replay_sweep

    url, sweep_id, rows = seeded
    with Store.open(url, create=False) as store:
        summaries = store.sweep_summaries()
        replayed = replay_sweep(store, sweep_id)
    for render, data in ((render_report, build_report(rows)), (render_sweep, rows),
                         (render_sweep_list, summaries), (render_replay, replayed)):
        buf = io.StringIO()
        render(data, Console(file=buf, width=80, force_terminal=True, color_system=None))
        text = buf.getvalue()
        assert "…" not in text, (render.__name__, text)
        assert max(len(line) for line in text.splitlines()) <= 80
