"""The worker's pieces without Ray: the recorder attached to a queued sweep (cancel behaviour)
and what a restart records again (rules, laws and the ledger are kept by key)."""
from __future__ import annotations

import pytest

from mutune.checks import CheckRecord

from mutune.services.server.worker import SweepCancelled, _AttachedRecorder, _Cancel


@pytest.fixture
def no_cancel():
    _Cancel.requested = False
    yield
    _Cancel.requested = False


def test_what_a_restart_records_again_replaces_what_was_recorded(store, no_cancel):
    sid = store.sweep_queued({"name": "q"}, project="alpha", seed=0, name="q")
    rec = _AttachedRecorder(store, sid)
    assert rec.sweep_started({"name": "q"}, 0, {"p": 1}) == sid
    rec.rule_fitted(sid, {"hyperparameter": "lr", "slope": 0.1})
    rec.law_fitted(sid, {"kind": "loss_vs_params"})
    rec.ledger_recorded(sid, [{"scope": "sweep", "name": "total_gpu_hours", "value": 1.0,
                               "unit": "GPU-h"}])
    again = _AttachedRecorder(store, sid)                  # a restart fits the same again
    again.rule_fitted(sid, {"hyperparameter": "lr", "slope": 0.2})
    again.rule_fitted(sid, {"hyperparameter": "output_mult", "slope": 0.0})
    again.law_fitted(sid, {"kind": "loss_vs_params", "E": 2.0})
    again.check_recorded(sid, CheckRecord("gate", {"outcome": "passed"}))
    again.check_recorded(sid, CheckRecord("gate", {"outcome": "stopped"}))
    again.ledger_recorded(sid, [{"scope": "sweep", "name": "total_gpu_hours", "value": 2.0,
                                 "unit": "GPU-h"}])
    counts = store.counts(sid)
    assert counts["transfer_rules"] == 2 and counts["scaling_laws"] == 1
    assert counts["sweep_checks"] == 1
    assert counts["ledger_entries"] == 1 and counts["provenance"] == 1
    rows = store.sweep_rows(sid)
    assert sorted((r["hyperparameter"], r["slope"]) for r in rows["rules"]) == [
        ("lr", 0.2), ("output_mult", 0.0)]
    assert [x["kind"] for x in rows["laws"]] == ["loss_vs_params"]
    assert [(x["kind"], x["data"]) for x in rows["checks"]] == [("gate", {"outcome": "stopped"})]
    assert next(x for x in rows["laws"] if x["kind"] == "loss_vs_params")["data"]["E"] == 2.0
    assert [e["value"] for e in rows["ledger"]] == [2.0]


def test_a_cancel_request_stops_the_next_write(store, no_cancel):
    sid = store.sweep_queued({"name": "q"}, project="alpha", seed=0, name="q")
    rec = _AttachedRecorder(store, sid)
    rec.sweep_started({"name": "q"}, 0, {})
    ps = rec.proxy_sweep_started(sid, 16, {})
    _Cancel.requested = True
    with pytest.raises(SweepCancelled, match=f"sweep {sid} was cancelled"):
        rec.trial_started(sid, ps, "proxy", "k", 16, {"lr": 0.1}, 0)
    rec.sweep_finished(sid, "cancelled", "by test")                  # the end still records
    assert store.sweep_summary(sid)["status"] == "cancelled"
    assert store.counts(sid)["trials"] == 0
