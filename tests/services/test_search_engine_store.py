"""Store side of the search engine (migration 0004): saved scheduler state, several decisions
per rung, resumed trials, fractional devices, and reaping stale trials by heartbeat lease."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from mutune.services.recovery import reap_stale
from mutune.config import parse_config
from mutune.errors import MutuneError
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.schedulers.factory import scheduler_from_state

CONFIG = {"name": "engine"}


def _trial(store):
    sweep = store.sweep_started(CONFIG, 0, {})
    ps = store.proxy_sweep_started(sweep, 16, {"scheduler": {"variant": "promotion"}})
    return sweep, ps, store.trial_started(sweep, ps, "proxy", "k0", 16, {"lr": 0.01}, 3)


def test_scheduler_state_is_saved_and_an_older_seq_never_overwrites(store):
    sweep, ps, _ = _trial(store)
    core = PromotionASHA(grace_period=1, reduction_factor=2, max_t=4)
    core.on_report("a", 1, float("nan"))
    core.on_report("b", 1, 0.5)
    store.scheduler_saved(ps, core.state_dict(), {"version": 1, "events": []}, 7)
    store.scheduler_saved(ps, {"kind": "stale"}, None, 5)       # older: ignored
    (row,) = store.sweep_rows(sweep)["proxy_sweeps"]
    assert row["state_seq"] == 7 and row["searcher_state"] == {"version": 1, "events": []}
    back = scheduler_from_state(row["scheduler_state"])        # NaN survived as "nan"
    assert back.state_dict() == json.loads(json.dumps(core.state_dict()))


def test_pause_promote_and_stop_at_one_rung_keep_three_rows(store):
    sweep, _, trial = _trial(store)
    for seq, decision in enumerate(["pause", "promote", "stop", "pause"], 1):
        store.scheduler_decided(trial, 3, 0.5, 0.6, decision, seq)
    events = store.sweep_rows(sweep)["events"]
    assert [e["decision"] for e in events] == ["pause", "promote", "stop"]


def test_resumed_trial_runs_again_and_bills_fractional_devices(store):
    sweep, _, trial = _trial(store)
    store.trial_checkpoint_dir(trial, "/ckpt/k0")
    store.mark_stale(trial, "heartbeat 9 s old > lease 3 s")
    store.trial_resumed(trial, "stale: heartbeat 9 s old > lease 3 s")
    store.sweep_finished(sweep, "failed", "driver died")
    store.sweep_resumed(sweep)
    rows = store.sweep_rows(sweep)
    (t,) = rows["trials"]
    assert (t["status"], t["checkpoint_dir"], rows["sweep"]["status"]) == \
        ("running", "/ckpt/k0", "running")
    store.trial_finished(trial, "completed", None, {
        "allocated_s": 4.0, "productive_s": 3.0, "devices": 0.5, "device_kind": "cuda",
        "restarts": 1, "repeated_steps": 3, "recovery_s": 0.25, "checkpoint_s": 0.01})
    (t,) = store.sweep_rows(sweep)["trials"]
    assert (t["devices"], t["restarts"], t["repeated_steps"], t["recovery_s"]) == \
        (0.5, 1, 3, 0.25)


def test_reap_stale_ends_only_trials_past_their_lease(store):
    sweep, ps, old = _trial(store)
    fresh = store.trial_started(sweep, ps, "proxy", "k1", 16, {"lr": 0.1}, 4)
    now = datetime.now(timezone.utc)
    store.heartbeat(old, now=now - timedelta(seconds=100))
    store.heartbeat(fresh, now=now - timedelta(seconds=1))
    with pytest.raises(MutuneError, match=r"\['k1'\] beat within their lease \(30 s\)"):
        reap_stale(store, sweep, lease_s=30, now=now)
    store.heartbeat(fresh, now=now - timedelta(seconds=31))
    lines = reap_stale(store, sweep, lease_s=30, now=now)
    assert len(lines) == 2 and lines[0].startswith("trial k0: heartbeat 100.")
    reasons = {t["key"]: t["reason"] for t in store.sweep_rows(sweep)["trials"]}
    assert all(r.startswith("stale: heartbeat") and "lease 30 s" in r
               for r in reasons.values())


def test_config_refuses_a_lease_not_comfortably_longer_than_the_heartbeat():
    from tests.conftest import config_error, make_tiny_config

    d = make_tiny_config().model_dump(mode="json")
    d["ray"].update(heartbeat_s=10, lease_s=25)
    with config_error("ray.lease_s", "25.0", "must be >= 3 × ray.heartbeat_s (10.0) = 30"):
        parse_config(d)
    d["ray"].update(lease_s=30)
    assert parse_config(d).ray.lease_s == 30
