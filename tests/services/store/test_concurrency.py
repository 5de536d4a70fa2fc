"""Many processes writing to one results database at once; heartbeats and stale trials.

Both backends (``store_url``): 16 spawned processes each write 50 reports for their own trial
at the same time; no row may be lost and no ``database is locked`` may escape.
"""
from __future__ import annotations

import multiprocessing as mp
import time
from datetime import datetime, timedelta, timezone

import pytest

from mutune.errors import StoreError
from mutune.services.store import Store

N_PROCS = 16
N_REPORTS = 50


def _writer(url: str, trial_id: int, start: object, out: object) -> None:
    """Child: wait for the start signal, then write N_REPORTS reports as fast as possible."""
    from mutune.services.store import Store, make_engine

    store = Store(make_engine(url))
    try:
        out.put((trial_id, "ready"))
        start.wait(120)
        for step in range(1, N_REPORTS + 1):
            store.trial_reported(trial_id, step, {"val_loss": 1.0 / step}, trial_id * 1000 + step)
            if step % 10 == 0:
                store.heartbeat(trial_id)
        store.trial_finished(trial_id, "completed", None, {"steps": N_REPORTS})
        out.put((trial_id, "ok"))
    except BaseException as exc:  # report every failure to the parent
        out.put((trial_id, f"{type(exc).__name__}: {exc}"))
    finally:
        store.close()


def test_sixteen_processes_lose_no_row(store_url):
    with Store.open(store_url) as store:
        sweep = store.sweep_started({"name": "conc"}, 0, {})
        ps = store.proxy_sweep_started(sweep, 16, {})
        trials = [store.trial_started(sweep, ps, "proxy", f"t{i}", 16, {"lr": 0.1}, i)
                  for i in range(N_PROCS)]
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(store_url, t, start, out)) for t in trials]
    for p in procs:
        p.start()
    try:
        ready = [out.get(timeout=120) for _ in procs]     # every child imported and connected
        assert sorted(r[0] for r in ready) == trials
        t0 = time.perf_counter()
        start.set()
        results = dict(out.get(timeout=120) for _ in procs)
        write_s = time.perf_counter() - t0
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert results == {t: "ok" for t in trials}
    print(f"{N_PROCS} processes × {N_REPORTS} reports written in {write_s:.2f} s")
    with Store.open(store_url) as store:
        assert store.counts(sweep)["trial_reports"] == N_PROCS * N_REPORTS
        rows = store.sweep_rows(sweep)
    for t in rows["trials"]:
        assert [r["step"] for r in t["reports"]] == list(range(1, N_REPORTS + 1))
        assert t["status"] == "completed"


def test_heartbeat_stale_trials_and_mark_stale(store):
    sweep = store.sweep_started({"name": "hb"}, 0, {})
    other = store.sweep_started({"name": "other"}, 0, {})
    a = store.trial_started(sweep, None, "proxy", "a", 16, {}, 0)
    b = store.trial_started(sweep, None, "proxy", "b", 16, {}, 1)
    c = store.trial_started(other, None, "proxy", "c", 16, {}, 2)
    done = store.trial_started(sweep, None, "proxy", "d", 16, {}, 3)
    store.trial_finished(done, "completed", None, {})
    now = datetime.now(timezone.utc)
    store.heartbeat(a, now=now - timedelta(seconds=120))
    store.heartbeat(b, now=now - timedelta(seconds=5))
    store.heartbeat(c, now=now - timedelta(seconds=600))
    stale = store.stale_trials(sweep, lease_s=60, now=now)
    assert [s["id"] for s in stale] == [a]
    assert stale[0]["age_s"] == pytest.approx(120, abs=1e-3)
    assert stale[0]["key"] == "a" and stale[0]["heartbeat_at"].endswith("+00:00")
    assert [s["id"] for s in store.stale_trials(lease_s=60, now=now)] == [c, a]  # oldest first
    assert store.stale_trials(sweep, lease_s=1, now=now - timedelta(seconds=200)) == []
    # a fresh beat saves it
    store.heartbeat(a)
    assert store.stale_trials(sweep, lease_s=60) == []
    # never beat: the start time counts; a report refreshes the beat too
    assert {s["id"] for s in store.stale_trials(
        lease_s=60, now=now + timedelta(hours=1))} == {a, b, c}
    store.trial_reported(b, 1, {"val_loss": 1.0}, 1)
    assert b not in {s["id"] for s in store.stale_trials(
        lease_s=3600 + 60, now=now + timedelta(hours=1))}

    assert store.mark_stale(c, "no heartbeat for 600 s (lease 60 s)") is True
    assert store.mark_stale(c, "again") is False           # already ended: left as it is
    assert store.mark_stale(done, "late") is False
    rows = {t["id"]: t for t in store.sweep_rows(other)["trials"]}
    assert rows[c]["status"] == "failed"
    assert rows[c]["reason"] == "stale: no heartbeat for 600 s (lease 60 s)"
    assert rows[c]["finished_at"] is not None
    assert {t["id"]: t["status"] for t in store.sweep_rows(sweep)["trials"]}[done] == "completed"
    with pytest.raises(StoreError, match="no trial with id 999"):
        store.heartbeat(999)
    with pytest.raises(StoreError, match="no trial with id 999"):
        store.mark_stale(999, "x")
    with pytest.raises(StoreError, match="lease_s = 0"):
        store.stale_trials(lease_s=0)


def _opener(url: str, i: int, start: object, out: object) -> None:
    """Child: at the start signal, create-or-upgrade the schema (half through
    ``mutune db upgrade``'s function, half through ``Store.open``) and record one sweep."""
    from mutune.services.store import Store, upgrade

    try:
        out.put((i, "ready"))
        start.wait(120)
        if i % 2:
            upgrade(url)
            store = Store.open(url, upgrade=False)
        else:
            store = Store.open(url)
        with store:
            store.sweep_started({"name": f"opener-{i}"}, i, {})
        out.put((i, "ok"))
    except BaseException as exc:  # report every failure to the parent
        out.put((i, f"{type(exc).__name__}: {exc}"[:500]))


def test_eight_processes_create_one_fresh_database_at_once(store_url):
    """Eight processes open one database that does not exist yet, at the same moment: every
    one succeeds, the schema ends at head, and every process's row is there."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import text

    from mutune.services.store import alembic_config, make_engine

    n = 8
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_opener, args=(store_url, i, start, out)) for i in range(n)]
    for p in procs:
        p.start()
    try:
        assert sorted(out.get(timeout=120)[0] for _ in procs) == list(range(n))
        start.set()
        results = dict(out.get(timeout=120) for _ in procs)
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert results == {i: "ok" for i in range(n)}
    head = ScriptDirectory.from_config(alembic_config(store_url)).get_current_head()
    engine = make_engine(store_url)
    try:
        with engine.connect() as c:
            assert [r[0] for r in c.execute(text("SELECT version_num FROM alembic_version"))] \
                == [head]
            names = sorted(r[0] for r in c.execute(text("SELECT name FROM sweeps")))
    finally:
        engine.dispose()
    assert names == sorted(f"opener-{i}" for i in range(n))
