"""The worker's pieces without Ray: the recorder attached to a queued sweep (cancel behaviour)
and what a restart records once (the one recovery path's :class:`RecordedOnce`)."""
from __future__ import annotations

import pytest

from mutune.pipeline.resume import RecordedOnce
from mutune.services.server.worker import SweepCancelled, _AttachedRecorder, _Cancel


@pytest.fixture
def no_cancel():
    _Cancel.requested = False
    yield
    _Cancel.requested = False


def test_attached_recorder_records_once_what_a_restart_finds(store, no_cancel):
    sid = store.sweep_queued({"name": "q"}, project="alpha", seed=0, name="q")
    rec = _AttachedRecorder(store, sid)
    assert rec.sweep_started({"name": "q"}, 0, {"p": 1}) == sid
    rec.rule_fitted(sid, {"hyperparameter": "lr", "slope": 0.1})
    rec.law_fitted(sid, {"kind": "loss_vs_params"})
    rec.ledger_recorded(sid, [{"scope": "sweep", "name": "total_gpu_hours", "value": 1.0,
                               "unit": "GPU-h"}])
    again = RecordedOnce(_AttachedRecorder(store, sid), store.sweep_rows(sid))   # a restart
    again.rule_fitted(sid, {"hyperparameter": "lr", "slope": 0.1})
    again.rule_fitted(sid, {"hyperparameter": "output_mult", "slope": 0.0})
    again.law_fitted(sid, {"kind": "loss_vs_params"})
    again.ledger_recorded(sid, [{"scope": "sweep", "name": "total_gpu_hours", "value": 1.0,
                                 "unit": "GPU-h"}])
    counts = store.counts(sid)
    assert counts["transfer_rules"] == 2 and counts["scaling_laws"] == 1
    assert counts["ledger_entries"] == 1 and counts["provenance"] == 1
    assert [r["hyperparameter"] for r in store.sweep_rows(sid)["rules"]] == ["lr",
                                                                             "output_mult"]


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
