"""The results store on SQLite and PostgreSQL: migrations, the recorder contract, read-back."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import threading

import pytest
import sqlalchemy as sa
from sqlalchemy import inspect, text

from mutune.checks import CheckRecord
from mutune.errors import StoreError
from mutune.pipeline.recording import MemoryRecorder, Recorder
from mutune.services.store import (DEFAULT_PROJECT, TABLES, Base, Store, alembic_config,
                                   finite_json, make_engine, normalize_url, upgrade)

CONFIG = {"name": "demo", "project": "lab", "widths": [8, 16], "target_width": 64}
PROVENANCE = {"packages": {"mutune": "0.1"}, "hardware": {"device_kind": "cpu"},
              "dataset_sha256": "ab" * 32}
TIMING = {"allocated_s": 10.5, "productive_s": 8.25, "eval_s": 1.0, "overhead_s": 1.25,
          "steps": 100, "samples": 3200, "devices": 1, "device_kind": "cpu"}


def _record_sweep(rec) -> dict[str, int]:
    """Drive ``rec`` through a whole main job with keyword arguments (the Protocol's names)."""
    ids: dict[str, int] = {}
    ids["sweep"] = rec.sweep_started(config=CONFIG, seed=7, provenance=PROVENANCE)
    ids["proxy"] = rec.proxy_sweep_started(sweep_id=ids["sweep"], width=8,
                                           settings={"scheduler": "asha", "eta": 3})
    ids["t1"] = rec.trial_started(sweep_id=ids["sweep"], proxy_sweep_id=ids["proxy"],
                                  kind="proxy", key="trial_0001", width=8,
                                  config={"lr": 0.01}, seed=1)
    ids["t2"] = rec.trial_started(sweep_id=ids["sweep"], proxy_sweep_id=ids["proxy"],
                                  kind="proxy", key="trial_0002", width=8,
                                  config={"lr": 0.1}, seed=2)
    rec.trial_reported(trial_id=ids["t1"], step=20, metrics={"val_loss": 1.5}, seq=3)
    rec.trial_reported(trial_id=ids["t1"], step=10, metrics={"val_loss": 2.0}, seq=1)
    rec.trial_reported(trial_id=ids["t2"], step=10, metrics={"val_loss": 2.5}, seq=2)
    rec.scheduler_decided(trial_id=ids["t2"], milestone=10, value=2.5, cutoff=2.25,
                          decision="stop", seq=4)
    rec.scheduler_decided(trial_id=ids["t1"], milestone=10, value=2.0, cutoff=2.25,
                          decision="continue", seq=2)
    rec.trial_finished(trial_id=ids["t2"], status="stopped", reason="rung 10",
                       timing={**TIMING, "steps": 10})
    rec.trial_finished(trial_id=ids["t1"], status="completed", reason=None, timing=TIMING)
    rec.trial_logged(trial_id=ids["t2"], stdout="hello\n", stderr="", traceback=None)
    rec.proxy_sweep_finished(proxy_sweep_id=ids["proxy"],
                             best={"trial_id": ids["t1"], "milestone": 20,
                                   "config": {"lr": 0.01}, "val_loss": 1.5, "trials": 2})
    rec.rule_fitted(sweep_id=ids["sweep"],
                    rule={"hyperparameter": "lr", "intercept": -4.5, "slope": -0.02,
                          "widths": [8, 16], "optima": [0.01, 0.0098], "target_width": 64,
                          "transferred_value": 0.0095, "formula": "log h = a + b log w"})
    ids["t3"] = rec.trial_started(sweep_id=ids["sweep"], proxy_sweep_id=None, kind="target",
                                  key="target", width=64, config={"lr": 0.0095}, seed=7)
    rec.law_fitted(sweep_id=ids["sweep"], law={"kind": "loss_vs_params", "E": 0.1,
                                                "alpha": float("nan"),
                                                "predicted_val_loss": 1.2})
    rec.check_recorded(sweep_id=ids["sweep"],
                       check=CheckRecord("gate", {"outcome": "passed", "gpu_hours": 0.25}))
    ids["target"] = rec.target_started(sweep_id=ids["sweep"], trial_id=ids["t3"], width=64,
                                       config={"lr": 0.0095})
    rec.trial_finished(trial_id=ids["t3"], status="completed", reason=None, timing=TIMING)
    rec.target_finished(target_id=ids["target"], val_loss=1.25, status="completed")
    rec.ledger_recorded(sweep_id=ids["sweep"], entries=[
        {"scope": "trial", "name": "gpu_hours", "value": 0.5, "unit": "h",
         "trial_id": ids["t1"], "formula": "allocated_s * devices / 3600",
         "inputs": {"allocated_s": 1800.0, "devices": 1}},
        {"scope": "sweep", "name": "mfu", "value": None, "unit": "ratio"},
    ])
    rec.sweep_finished(sweep_id=ids["sweep"], status="completed")
    return ids


def _head() -> str:
    from alembic.script import ScriptDirectory

    from mutune.services.store import alembic_config
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def test_upgrade_from_the_baseline_keeps_rows(store_url):
    upgrade(store_url, revision="0001")
    engine = make_engine(store_url)
    try:
        assert "scaling_laws" not in inspect(engine).get_table_names()
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO sweeps (name, status, seed, config, created_at) "
                              "VALUES ('old', 'completed', 1, '{}', CURRENT_TIMESTAMP)"))
        upgrade(store_url)
        assert set(inspect(engine).get_table_names()) == set(TABLES) | {"alembic_version"}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT name FROM sweeps")).scalars().all() == ["old"]
    finally:
        engine.dispose()


def _head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def test_upgrade_creates_tables_and_second_upgrade_is_a_no_op(store_url):
    upgrade(store_url)
    engine = make_engine(store_url)
    try:
        assert set(inspect(engine).get_table_names()) == set(TABLES) | {"alembic_version"}
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO sweeps (name, status, seed, config, created_at) "
                              "VALUES ('kept', 'running', 1, '{}', CURRENT_TIMESTAMP)"))
        upgrade(store_url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() \
                == [_head()]
            assert conn.execute(text("SELECT name FROM sweeps")).scalars().all() == ["kept"]
        assert set(inspect(engine).get_table_names()) == set(TABLES) | {"alembic_version"}
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(store_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    upgrade(store_url)
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
    finally:
        engine.dispose()


def test_upgrade_moves_a_sweeps_checks_out_of_its_laws_and_back(store_url):
    from alembic import command

    from mutune.services.report.data import build_report

    upgrade(store_url, revision="0008")
    engine = make_engine(store_url)
    old = [("loss_vs_params", {"kind": "loss_vs_params", "E": 0.5}),
           ("gate", {"kind": "gate", "outcome": "stopped", "rounds": []}),
           ("gate", {"kind": "gate", "outcome": "passed", "rounds": [], "setting": "widen"}),
           ("preflight", {"kind": "preflight", "warnings": ["w"], "coord_check": None})]
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO sweeps (name, status, seed, config, created_at) "
                              "VALUES ('old', 'completed', 1, '{}', CURRENT_TIMESTAMP)"))
            laws = sa.table("scaling_laws", sa.column("sweep_id"), sa.column("kind"),
                            sa.column("data", sa.JSON))
            conn.execute(laws.insert(), [{"sweep_id": 1, "kind": k, "data": d} for k, d in old])
        with Store.open(store_url) as store:             # opening upgrades to the head
            rows = store.sweep_rows(1)
            report = build_report(rows)
        assert [x["kind"] for x in rows["laws"]] == ["loss_vs_params"]
        assert {x["kind"]: x["data"] for x in rows["checks"]} == {
            "gate": {"outcome": "passed", "rounds": [], "setting": "widen"},
            "preflight": {"warnings": ["w"], "coord_check": None}}
        assert report["gate"]["outcome"] == "passed"
        assert report["preflight"]["warnings"] == ["w"]
        command.downgrade(alembic_config(store_url), "0008")
        assert "sweep_checks" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            kinds = conn.execute(text("SELECT kind FROM scaling_laws ORDER BY id")).scalars()
            assert sorted(kinds) == ["gate", "loss_vs_params", "preflight"]
    finally:
        engine.dispose()


def test_a_check_recorded_again_replaces_the_one_before(store):
    sid = store.sweep_started({"name": "c"}, 0, {})
    store.check_recorded(sid, CheckRecord("importance", {"width": 64, "n_trials": 8}))
    store.check_recorded(sid, CheckRecord("importance", {"width": 128, "n_trials": 9}))
    store.check_recorded(sid, CheckRecord("target_watch", {"skipped": "a score"}))
    rows = store.sweep_rows(sid)
    assert [(c["kind"], c["data"]) for c in rows["checks"]] == [
        ("importance", {"width": 128, "n_trials": 9}), ("target_watch", {"skipped": "a score"})]
    with pytest.raises(StoreError, match="CheckRecord"):
        store.check_recorded(sid, {"kind": "gate"})
    with pytest.raises(StoreError, match="sweep"):
        store.check_recorded(sid + 99, CheckRecord("gate", {}))


@pytest.mark.parametrize("kind, data, field", [
    ("watch", {}, "CheckRecord.kind"), ("gate", [1], "CheckRecord.data"),
    ("gate", {"kind": "importance"}, "CheckRecord.data['kind']")])
def test_a_check_record_names_what_is_wrong(kind, data, field):
    with pytest.raises(ValueError) as err:
        CheckRecord(kind, data)
    assert str(err.value).startswith(f"{field} = ")


def test_store_is_a_recorder(store):
    assert isinstance(store, Recorder)
    assert isinstance(MemoryRecorder(), Recorder)


def test_full_recorder_sequence_reads_back(store):
    ids = _record_sweep(store)
    rows = store.sweep_rows(ids["sweep"])
    json.dumps(rows, allow_nan=False)  # plain JSON-able data

    sweep = rows["sweep"]
    assert (sweep["id"], sweep["name"], sweep["project"], sweep["seed"]) == \
        (ids["sweep"], "demo", "lab", 7)
    assert sweep["status"] == "completed" and sweep["reason"] is None
    assert sweep["config"] == CONFIG
    assert sweep["finished_at"] >= sweep["created_at"]
    assert sweep["created_at"].endswith("+00:00")
    assert rows["provenance"] == PROVENANCE

    (proxy,) = rows["proxy_sweeps"]
    assert (proxy["width"], proxy["status"]) == (8, "completed")
    assert proxy["settings"] == {"scheduler": "asha", "eta": 3}
    assert proxy["best"]["trial_id"] == ids["t1"] and proxy["best"]["val_loss"] == 1.5

    t1, t2, t3 = rows["trials"]
    assert [t["id"] for t in (t1, t2, t3)] == [ids["t1"], ids["t2"], ids["t3"]]
    assert (t1["kind"], t1["key"], t1["width"], t1["seed"], t1["status"]) == \
        ("proxy", "trial_0001", 8, 1, "completed")
    assert t1["config"] == {"lr": 0.01} and t1["proxy_sweep_id"] == ids["proxy"]
    assert {k: t1[k] for k in TIMING} == TIMING
    assert t1["finished_at"] is not None and t1["heartbeat_at"] is not None
    assert [r["step"] for r in t1["reports"]] == [10, 20]
    assert t1["reports"][0] == {"step": 10, "seq": 1, "metrics": {"val_loss": 2.0}}
    assert (t2["status"], t2["reason"], t2["steps"]) == ("stopped", "rung 10", 10)
    assert (t3["kind"], t3["proxy_sweep_id"], t3["reports"]) == ("target", None, [])

    assert [(e["seq"], e["trial_id"], e["decision"]) for e in rows["events"]] == \
        [(2, ids["t1"], "continue"), (4, ids["t2"], "stop")]
    assert rows["events"][1]["value"] == 2.5 and rows["events"][1]["cutoff"] == 2.25
    assert rows["events"][1]["milestone"] == 10

    (rule,) = rows["rules"]
    assert (rule["hyperparameter"], rule["intercept"], rule["slope"]) == ("lr", -4.5, -0.02)
    assert rule["data"]["optima"] == [0.01, 0.0098] and rule["data"]["target_width"] == 64

    target = rows["target"]
    assert (target["id"], target["trial_id"], target["width"]) == (ids["target"], ids["t3"], 64)
    assert (target["status"], target["val_loss"], target["config"]) == \
        ("completed", 1.25, {"lr": 0.0095})

    gpu, mfu = rows["ledger"]
    assert (gpu["scope"], gpu["name"], gpu["value"], gpu["unit"], gpu["trial_id"]) == \
        ("trial", "gpu_hours", 0.5, "h", ids["t1"])
    assert gpu["formula"] == "allocated_s * devices / 3600"
    assert gpu["inputs"] == {"allocated_s": 1800.0, "devices": 1}
    assert (mfu["value"], mfu["trial_id"], mfu["formula"], mfu["inputs"]) == \
        (None, None, None, None)

    assert store.counts(ids["sweep"]) == {
        "sweeps": 1, "provenance": 1, "proxy_sweeps": 1, "trials": 3, "trial_reports": 3,
        "scheduler_events": 2, "transfer_rules": 1, "target_runs": 1, "ledger_entries": 2,
        "scaling_laws": 1, "sweep_checks": 1, "trial_logs": 1}
    (law,) = rows["laws"]
    assert law["kind"] == "loss_vs_params" and law["data"]["alpha"] == "nan"
    assert law["data"]["predicted_val_loss"] == 1.2
    (check,) = rows["checks"]
    assert (check["kind"], check["data"]) == ("gate", {"outcome": "passed", "gpu_hours": 0.25})
    (listed,) = store.list_sweeps()
    assert listed["id"] == ids["sweep"] and listed["status"] == "completed"


def test_memory_recorder_accepts_the_same_calls():
    rec = MemoryRecorder()
    _record_sweep(rec)
    assert len(rec.of("trial_reported")) == 3


def test_sweep_rows_of_a_fresh_sweep(store):
    sweep_id = store.sweep_started({"widths": [8]}, 0, {})
    rows = store.sweep_rows(sweep_id)
    assert rows["sweep"]["status"] == "running" and rows["sweep"]["project"] == DEFAULT_PROJECT
    assert rows["sweep"]["finished_at"] is None
    assert (rows["proxy_sweeps"], rows["trials"], rows["events"], rows["rules"],
            rows["target"], rows["ledger"]) == ([], [], [], [], None, [])


def test_duplicate_reports_and_decisions_keep_one_row(store):
    sweep_id = store.sweep_started(CONFIG, 0, {})
    trial = store.trial_started(sweep_id, None, "proxy", "t", 8, {}, 0)
    store.trial_reported(trial, 10, {"val_loss": 2.0}, 1)
    store.trial_reported(trial, 10, {"val_loss": 9.0}, 5)  # a resumed trial repeats its step
    store.scheduler_decided(trial, 10, 2.0, 3.0, "continue", 2)
    store.scheduler_decided(trial, 10, 2.0, 3.0, "continue", 6)
    rows = store.sweep_rows(sweep_id)
    assert rows["trials"][0]["reports"] == [{"step": 10, "seq": 1, "metrics": {"val_loss": 2.0}}]
    assert [e["seq"] for e in rows["events"]] == [2]
    assert store.counts(sweep_id)["trial_reports"] == 1


def test_non_finite_values_round_trip(store):
    nan, inf = float("nan"), float("inf")
    sweep_id = store.sweep_started({**CONFIG, "bad": nan}, 0, {"x": [inf]})
    trial = store.trial_started(sweep_id, None, "proxy", "t", 8, {"lr": -inf}, 0)
    store.trial_reported(trial, 10, {"val_loss": nan, "train_loss": inf, "lr": 0.1}, 1)
    store.scheduler_decided(trial, 10, nan, inf, "diverged", 2)
    store.trial_finished(trial, "diverged", "val_loss is nan", {**TIMING, "eval_s": nan})
    store.rule_fitted(sweep_id, {"hyperparameter": "lr", "intercept": nan, "slope": 0.5,
                                 "optima": [inf]})
    target = store.target_started(sweep_id, trial, 64, {})
    store.target_finished(target, nan, "diverged")
    store.ledger_recorded(sweep_id, [{"scope": "sweep", "name": "ettr", "value": nan,
                                      "unit": "ratio", "inputs": {"wall_s": inf}}])
    rows = store.sweep_rows(sweep_id)
    json.dumps(rows, allow_nan=False)
    assert rows["sweep"]["config"]["bad"] == "nan" and rows["provenance"] == {"x": ["inf"]}
    t = rows["trials"][0]
    assert t["config"] == {"lr": "-inf"} and t["eval_s"] is None and t["status"] == "diverged"
    assert t["reports"][0]["metrics"] == {"val_loss": "nan", "train_loss": "inf", "lr": 0.1}
    assert (rows["events"][0]["value"], rows["events"][0]["cutoff"]) == (None, None)
    assert rows["rules"][0]["intercept"] is None and rows["rules"][0]["data"]["optima"] == ["inf"]
    assert rows["target"]["val_loss"] is None
    assert rows["ledger"][0]["value"] is None and rows["ledger"][0]["inputs"] == {"wall_s": "inf"}


def test_finite_json():
    assert finite_json({1: (float("nan"), float("-inf")), "a": {"b": 1.5, "c": True}}) == \
        {"1": ["nan", "-inf"], "a": {"b": 1.5, "c": True}}
    assert finite_json(None) is None and math.isclose(finite_json(2.0), 2.0)


BAD_CALLS = [
    (lambda s, ids: s.proxy_sweep_started(999_999, 8, {}), "999999"),
    (lambda s, ids: s.trial_started(999_999, None, "proxy", "k", 8, {}, 0), "999999"),
    (lambda s, ids: s.trial_started(ids["sweep"], 999_998, "proxy", "k", 8, {}, 0), "999998"),
    (lambda s, ids: s.trial_reported(999_997, 1, {}, 1), "999997"),
    (lambda s, ids: s.scheduler_decided(999_996, 1, 1.0, 1.0, "stop", 1), "999996"),
    (lambda s, ids: s.trial_finished(999_995, "completed", None, {}), "999995"),
    (lambda s, ids: s.proxy_sweep_finished(999_994, {}), "999994"),
    (lambda s, ids: s.rule_fitted(999_993, {"hyperparameter": "lr"}), "999993"),
    (lambda s, ids: s.target_started(ids["sweep"], 999_992, 64, {}), "999992"),
    (lambda s, ids: s.target_finished(999_991, 1.0, "completed"), "999991"),
    (lambda s, ids: s.ledger_recorded(999_990, []), "999990"),
    (lambda s, ids: s.ledger_recorded(ids["sweep"], [{"scope": "trial", "name": "x",
                                                      "value": 1.0, "unit": "s",
                                                      "trial_id": 999_989}]), "999989"),
    (lambda s, ids: s.sweep_finished(999_988, "failed"), "999988"),
    (lambda s, ids: s.sweep_rows(999_987), "999987"),
    (lambda s, ids: s.counts(999_986), "999986"),
    (lambda s, ids: s.trial_started(ids["sweep"], None, "giant", "k", 8, {}, 0), "giant"),
    (lambda s, ids: s.trial_finished(ids["trial"], "running", None, {}), "running"),
    (lambda s, ids: s.ledger_recorded(ids["sweep"], [{"scope": "s", "name": "n"}]), "value"),
]


def test_bad_ids_and_values_raise_store_error(store):
    sweep_id = store.sweep_started(CONFIG, 0, {})
    ids = {"sweep": sweep_id, "trial": store.trial_started(sweep_id, None, "proxy", "t", 8, {}, 0)}
    before = store.counts(sweep_id)
    for index, (call, needle) in enumerate(BAD_CALLS):
        with pytest.raises(StoreError, match=needle):
            call(store, ids)
            pytest.fail(f"BAD_CALLS[{index}] did not raise")  # pragma: no cover
    assert store.counts(sweep_id) == before  # nothing half-written


def test_concurrent_writers_do_not_lose_reports(store_url):
    with Store.open(store_url) as first:
        sweep_id = first.sweep_started(CONFIG, 0, {})
        trials = [first.trial_started(sweep_id, None, "proxy", f"t{i}", 8, {}, i)
                  for i in range(2)]
    errors: list[BaseException] = []

    def writer(trial_id: int) -> None:
        try:
            with Store.open(store_url, upgrade=False) as own:
                for step in range(25):
                    own.trial_reported(trial_id, step, {"val_loss": 1.0 / (step + 1)}, step)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in trials]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with Store.open(store_url, upgrade=False) as reader:
        assert reader.counts(sweep_id)["trial_reports"] == 50


def test_sqlite_engine_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = make_engine("sqlite:///nested/relative.db")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1     # NORMAL
    finally:
        engine.dispose()
    assert (tmp_path / "nested" / "relative.db").exists()
    with Store.open("sqlite:///nested/relative.db") as opened:
        assert opened.list_sweeps() == []


def test_postgres_urls_use_psycopg3():
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    with pytest.raises(StoreError, match="not a database URL"):
        normalize_url("not a url")


def test_importing_the_store_pulls_in_no_heavy_packages():
    code = ("import sys, mutune.services.store; "
            "print(sorted(m for m in ('torch', 'ray', 'numpy', 'fastapi', 'alembic') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_locked_database_is_retried_then_reported(store, monkeypatch):
    from sqlalchemy.exc import OperationalError

    from mutune.services.store import _store

    monkeypatch.setattr(_store.time, "sleep", lambda seconds: None)
    attempts = []

    def flaky(session):
        attempts.append(1)
        if len(attempts) < 3:
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        return "written"

    assert store._write(flaky) == "written" and len(attempts) == 3

    def always_locked(session):
        raise OperationalError("INSERT", {}, Exception("database is locked"))

    with pytest.raises(StoreError, match="database is locked"):
        store._write(always_locked)


def test_every_trial_status_the_search_backends_record_is_accepted(store_url):
    """``zombie`` (a trial that held its devices and reported nothing) is a terminal status
    the Ray backend records; the store used to refuse it."""
    from mutune.search.recording import TRIAL_STATUSES

    with Store.open(store_url) as store:
        sweep = store.sweep_started({"name": "s"}, 0, {})
        for i, status in enumerate(s for s in TRIAL_STATUSES if s != "running"):
            tid = store.trial_started(sweep, None, "target", f"k{i}", 16, {"lr": 0.1}, i)
            store.trial_finished(tid, status, "why", {"allocated_s": 1.0})
        got = [t["status"] for t in store.sweep_rows(sweep)["trials"]]
    assert "zombie" in got and len(got) == len(TRIAL_STATUSES) - 1


def test_a_report_committed_before_the_process_is_killed_is_kept(tmp_path):
    """WAL with synchronous=NORMAL: a commit does not wait for the disk, yet a process
    SIGKILLed right after it loses nothing (only an OS crash or power loss could)."""
    import subprocess
    import sys
    import textwrap

    url = f"sqlite:///{tmp_path / 'kill.db'}"
    code = textwrap.dedent(f"""
        import os, signal
        from mutune.services.store import Store
        st = Store.open({url!r})
        sid = st.sweep_started({{"x": 1}}, 0, {{}})
        ps = st.proxy_sweep_started(sid, 64, {{}})
        tid = st.trial_started(sid, ps, "proxy", "k", 64, {{"lr": 0.1}}, 1)
        for i in range(1, 6):
            st.trial_reported(tid, i, {{"val_loss": 1.0 / i}}, i)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == -9, done.stderr
    with Store.open(url, upgrade=False) as reader:
        (sweep,) = reader.list_sweeps()
        assert reader.counts(sweep["id"])["trial_reports"] == 5
