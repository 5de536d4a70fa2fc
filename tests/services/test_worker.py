"""The worker's pieces without Ray: the recorder attached to a queued sweep (restart and cancel
behaviour) and the rebuild of a completed width from its rows."""
from __future__ import annotations

import pytest

from mutune.search.best import best_at_rung
from mutune.services.server.restart import recorded_width
from mutune.services.server.worker import SweepCancelled, _AttachedRecorder, _Cancel
from tests.services.test_replay_service import record_sweep


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
    again = _AttachedRecorder(store, sid, store.sweep_rows(sid))     # a restart
    assert again.sweep_started({"name": "q"}, 0, {"p": 2}) == sid
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


def test_recorded_width_rebuilds_the_best_and_the_rungs(store):
    sid, ids = record_sweep(store, widths=(16, 32), n=9)
    rows = store.sweep_rows(sid)
    for ps in rows["proxy_sweeps"]:
        result, outcome = recorded_width(rows, ps)
        assert result.width == ps["width"] and result.proxy_sweep_id == ps["id"]
        assert result.best_trial_id == ps["best"]["trial_id"]
        assert result.best_val_loss == pytest.approx(ps["best"]["val_loss"])
        assert [t.trial_id for t in outcome.trials] == ids[ps["width"]]
        best = best_at_rung(outcome.core.rung_values(), mode="min", min_trials=3)
        assert best.milestone == ps["best"]["milestone"]
        assert best.value == pytest.approx(ps["best"]["val_loss"])
        by_id = {t["id"]: t for t in rows["trials"]}
        for t in outcome.trials:
            assert t.point["hparams"] == by_id[t.trial_id]["config"]
            assert t.timing["evals"] == len(by_id[t.trial_id]["reports"])
            assert t.last_step == by_id[t.trial_id]["reports"][-1]["step"]
