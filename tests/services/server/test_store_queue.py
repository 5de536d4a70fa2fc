"""The store's search-server rows on SQLite and PostgreSQL: the sweep queue, attaching a run
to a queued sweep, closing what a dead run left open, and hashed API tokens."""
from __future__ import annotations

import threading

import pytest

from mutune.errors import StoreError
from mutune.services.server.auth import create_token, token_digest

CONFIG = {"name": "q", "widths": [16, 32], "search": {"num_samples": 3}}


def test_queue_claim_is_compare_and_set_and_oldest_first(store):
    ids = [store.sweep_queued(CONFIG, project="alpha", seed=i, name=f"s{i}") for i in range(6)]
    claimed: list[int] = []
    lock = threading.Lock()

    def claim():
        got = store.claim_queued()
        with lock:
            claimed.append(got)
    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [c for c in claimed if c is not None]
    assert sorted(got) == ids and len(got) == len(set(got))   # each exactly once
    assert claimed.count(None) == 2
    assert all(store.sweep_summary(i)["status"] == "running" for i in ids)
    assert store.requeue_running() == ids
    assert store.sweep_summary(ids[0])["status"] == "queued"
    assert "re-queued" in store.sweep_summary(ids[0])["reason"]
    assert store.claim_queued() == ids[0]


def test_cancel_only_a_queued_sweep(store):
    a = store.sweep_queued(CONFIG, project="alpha", seed=0, name="a")
    b = store.sweep_queued(CONFIG, project="alpha", seed=0, name="b")
    assert store.claim_queued() == a
    assert store.cancel_queued(a) is False                    # running: not here
    assert store.cancel_queued(b) is True
    assert store.sweep_summary(b)["status"] == "cancelled"
    assert store.sweep_summary(b)["finished_at"] is not None
    with pytest.raises(StoreError, match="no sweep with id 999"):
        store.cancel_queued(999)


def test_a_run_attaches_to_its_queued_row(store):
    sid = store.sweep_queued(CONFIG, project="alpha", seed=3, name="q")
    assert store.sweep_started({**CONFIG, "cost": {"project": "other"}}, 3, {"v": 1},
                               sweep_id=sid) == sid
    rows = store.sweep_rows(sid)
    assert rows["sweep"]["status"] == "running" and rows["sweep"]["project"] == "alpha"
    assert rows["provenance"] == {"v": 1}
    assert store.sweep_started(CONFIG, 3, {"v": 2}, sweep_id=sid) == sid   # a restart
    assert store.counts(sid)["provenance"] == 1
    assert store.sweep_rows(sid)["provenance"] == {"v": 2}
    assert len(store.list_sweeps()) == 1
    store.sweep_finished(sid, "completed")
    with pytest.raises(StoreError, match="'completed'"):
        store.sweep_started(CONFIG, 3, {}, sweep_id=sid)
    plain = store.sweep_started(CONFIG, 1, {})                            # mutune run's path
    assert plain != sid and store.sweep_summary(plain)["status"] == "running"


def test_mark_interrupted_closes_running_rows_and_deletes_nothing(store):
    sid = store.sweep_queued(CONFIG, project="alpha", seed=0, name="q")
    store.sweep_started(CONFIG, 0, {}, sweep_id=sid)
    ps = store.proxy_sweep_started(sid, 16, {})
    done = store.trial_started(sid, ps, "proxy", "a", 16, {"lr": 0.1}, 0)
    store.trial_reported(done, 3, {"val_loss": 1.5}, 1)
    store.trial_finished(done, "completed", None, {})
    live = store.trial_started(sid, ps, "proxy", "b", 16, {"lr": 0.2}, 1)
    store.trial_reported(live, 3, {"val_loss": 1.2}, 2)
    store.scheduler_decided(live, 3, 1.2, 1.5, "continue", 3)
    before = store.counts(sid)
    assert store.mark_interrupted(sid, "server died") == {"trials": 1, "proxy_sweeps": 1,
                                                          "target_runs": 0}
    assert store.counts(sid) == before
    rows = store.sweep_rows(sid)
    by_key = {t["key"]: t for t in rows["trials"]}
    assert by_key["a"]["status"] == "completed"
    assert by_key["b"]["status"] == "failed" and by_key["b"]["reason"] == "stale: server died"
    assert rows["proxy_sweeps"][0]["status"] == "interrupted"
    assert store.max_seq(sid) == 3
    prog = store.sweep_progress(sid)
    assert prog["best_so_far"]["val_loss"] == 1.2 and prog["best_so_far"]["trial_id"] == live
    assert prog["progress"]["trials_total"] == 3 * 2 + 1


def test_tokens_are_stored_hashed_and_can_be_revoked(store):
    token_id, token = create_token(store, "alpha")
    assert len(token) >= 43
    assert store.token_project(token_digest(token)) == "alpha"
    assert store.token_project(token) is None                  # the plaintext is not stored
    with store.engine.connect() as conn:
        from sqlalchemy import text
        stored = conn.execute(text("SELECT token_sha256 FROM api_tokens")).scalars().all()
    assert stored == [token_digest(token)] and token not in stored
    assert store.list_tokens()[0]["project"] == "alpha" and "token_sha256" not in \
        store.list_tokens()[0]
    assert store.token_revoked(token_id) is True
    assert store.token_revoked(token_id) is False
    assert store.token_project(token_digest(token)) is None
    with pytest.raises(StoreError, match="non-empty project"):
        create_token(store, " ")
    with pytest.raises(StoreError, match="64 lowercase hex"):
        store.token_added("alpha", "abc")


def test_sweeps_page_is_per_project_newest_first(store):
    a = [store.sweep_queued(CONFIG, project="alpha", seed=0, name=f"a{i}") for i in range(3)]
    store.sweep_queued(CONFIG, project="beta", seed=0, name="b")
    items, total = store.sweeps_page(project="alpha", offset=1, limit=1)
    assert total == 3 and [s["id"] for s in items] == [a[1]]
    assert store.sweeps_page(project=None, offset=0, limit=10)[1] == 4
