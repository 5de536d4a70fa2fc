"""`mutune.Client` and `mutune.submit` against a real `mutune serve` (no worker: sweeps stay
queued; a seeded completed sweep serves the report and trials)."""
from __future__ import annotations

import signal

import pytest

import mutune
from mutune.errors import ConfigError
from mutune.services.server.client import (AuthError, Conflict, NotFound, PayloadTooLarge,
                                           SweepTimeout)
from mutune.services.store import Store
from tests.conftest import make_tiny_config
from tests.services.conftest import make_token, start_server
from tests.services.seeded import COST, TARGET, seed_sweep

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("services.server.test_client")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("client")
    db = f"sqlite:///{tmp / 'mutune.db'}"
    with Store.open(db) as store:
        done = seed_sweep(store, "alpha")
    server = start_server(db, tmp, env={"MUTUNE_MAX_BODY_BYTES": "8192"})
    server.done, server.tmp = done, tmp
    try:
        yield server
    finally:
        server.kill(signal.SIGTERM)


def test_submit_path_config_and_mapping(srv):
    token = make_token(srv.db, "alpha")
    cfg = make_tiny_config()
    path = srv.tmp / "tiny.json"          # JSON is YAML: sent as the file's bytes
    path.write_text(cfg.model_dump_json())
    with mutune.Client(srv.url, token) as client:
        handles = [client.submit(path), client.submit(str(path)), client.submit(cfg),
                   client.submit(cfg.model_dump(mode="json"))]
        assert len({h.id for h in handles}) == 4
        st = handles[0].status()
        assert st["status"] == "queued" and st["project"] == "alpha"
        assert handles[0].trials() == []
        with pytest.raises(Conflict, match="queued"):
            handles[0].report()
        with pytest.raises(SweepTimeout, match="still queued"):
            handles[0].wait(timeout=0.3, poll_s=0.1, progress=False)
        assert handles[0].cancel() == {"id": handles[0].id, "status": "cancelled"}
        assert handles[0].wait(timeout=5, progress=True)["status"] == "cancelled"
        with pytest.raises(Conflict, match="only a queued or running"):
            handles[0].cancel()
        ids = [s["id"] for s in client.sweeps(limit=10)["items"]]
        assert {h.id for h in handles} <= set(ids)


def test_report_and_trials_of_a_completed_sweep(srv):
    token = make_token(srv.db, "alpha")
    sweep = mutune.Client(srv.url, token).sweep(srv.done)
    assert sweep.wait(timeout=5, progress=False)["status"] == "completed"
    rep = sweep.report()
    assert rep["sweep_id"] == srv.done
    assert rep["cost"]["total_gpu_hours"] == pytest.approx(COST["total_gpu_hours"])
    assert rep["target"]["val_loss"] == pytest.approx(TARGET["val_loss"])
    trials = sweep.trials()
    assert len(trials) == 2 * 9 + 1 and trials[-1]["kind"] == "target"
    st = sweep.status()
    assert st["progress"]["fraction"] == 1.0
    with Store.open(srv.db) as store:
        rows = store.sweep_rows(srv.done)
    lowest = min(r["metrics"]["val_loss"] for t in rows["trials"] if t["kind"] == "proxy"
                 for r in t["reports"])
    assert st["best_so_far"]["val_loss"] == pytest.approx(lowest)


def test_server_errors_are_typed_with_the_servers_message(srv, monkeypatch):
    token = make_token(srv.db, "alpha")
    client = mutune.Client(srv.url, token)
    bad = make_tiny_config().model_dump(mode="json")
    bad["search"]["num_samples"] = 0
    with pytest.raises(ConfigError) as err:
        client.submit(bad)
    assert err.value.errors[0]["field"] == "search.num_samples"
    assert err.value.errors[0]["value"] == "0" and "search.num_samples" in str(err.value)
    with pytest.raises(ConfigError, match="cannot read"):
        client.submit(srv.tmp / "missing.yaml")
    big = make_tiny_config().model_dump(mode="json")
    big["name"] = "x" * 10_000
    with pytest.raises(PayloadTooLarge, match="8192"):
        client.submit(big)
    with pytest.raises(NotFound, match="no sweep with id 424242"):
        client.sweep(424242).status()
    with pytest.raises(AuthError, match="invalid or revoked"):
        mutune.Client(srv.url, "nope").sweeps()
    monkeypatch.delenv("MUTUNE_TOKEN", raising=False)
    with pytest.raises(AuthError, match="MUTUNE_TOKEN"):
        mutune.submit(make_tiny_config(), url=srv.url)
    monkeypatch.setenv("MUTUNE_TOKEN", token)
    monkeypatch.setenv("MUTUNE_URL", srv.url)
    handle = mutune.submit(make_tiny_config())
    assert handle.status()["status"] == "queued"
